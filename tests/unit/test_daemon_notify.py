"""sd_notify over a real AF_UNIX datagram socket, and the simulated NVML event API the
XID listener waits on."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pynvml
import pytest

from clusterdiag.agent.daemon import xid
from clusterdiag.agent.daemon.notify import Notifier
from clusterdiag.agent.sim.node import build, env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.state import counter as sim_counter
from clusterdiag.agent.sim.writers.nvml import build_module


def test_notify_sends_datagrams_and_unsets_the_environment(tmp_path: Path) -> None:
    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        environ = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "3000000",
                   "WATCHDOG_PID": str(os.getpid())}
        notifier = Notifier(environ)
        assert environ == {}  # children do not inherit it
        assert notifier.watchdog_s == 3.0
        assert notifier.ready("verdict pass")
        assert notifier.watchdog()
        assert sock.recv(100) == b"READY=1\nSTATUS=verdict pass"
        assert sock.recv(100) == b"WATCHDOG=1"


def test_notify_is_a_no_op_without_systemd() -> None:
    notifier = Notifier({"WATCHDOG_USEC": "100", "WATCHDOG_PID": "1"})
    assert not notifier.enabled
    assert notifier.watchdog_s is None  # the watchdog is for another process
    assert not notifier.ready("x")


def _env(at_s: float) -> object:
    return env_for(NodeSpec("n1", "dgx-h100", faults=[
        {"node": "n1", "kind": "xid", "gpu": 5, "code": 48, "at_s": at_s}]))


def test_simulated_event_set_wait_delivers_scheduled_xid_once() -> None:
    node = build(NodeSpec("n1", "dgx-h100", faults=[
        {"node": "n1", "kind": "xid", "gpu": 5, "code": 48, "at_s": 2.0}]))
    nv = build_module(node)
    nv.nvmlInit()
    event_set = nv.nvmlEventSetCreate()
    for i in range(nv.nvmlDeviceGetCount()):
        nv.nvmlDeviceRegisterEvents(nv.nvmlDeviceGetHandleByIndex(i),
                                    pynvml.nvmlEventTypeXidCriticalError, event_set)
    # the node's clock starts now, not when it was built (however long that took on a
    # loaded machine): the event is due 2 s after this, well after the first wait
    node.epoch = sim_counter.now()
    with pytest.raises(pynvml.NVMLError) as timeout:
        nv.nvmlEventSetWait_v2(event_set, 50)
    assert timeout.value.value == pynvml.NVML_ERROR_TIMEOUT
    data = nv.nvmlEventSetWait_v2(event_set, 10_000)
    assert (nv.nvmlDeviceGetIndex(data.device), data.eventData) == (5, 48)
    with pytest.raises(pynvml.NVMLError):
        nv.nvmlEventSetWait_v2(event_set, 50)  # delivered once


def test_listener_process_reports_the_event() -> None:
    listener = xid.start(_env(0.2))  # type: ignore[arg-type]
    messages: list[dict[str, object]] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and not any(m["t"] == "xid" for m in messages):
            got = listener.read()
            assert got is not None, messages
            messages += got
            time.sleep(0.02)
    finally:
        listener.stop()
    kinds = [m["t"] for m in messages]
    assert kinds[0] == "ready"
    event = next(m for m in messages if m["t"] == "xid")
    assert (event["xid"], event["gpu_index"]) == (48, 5)
    assert str(event["gpu_uuid"]).startswith("GPU-")
