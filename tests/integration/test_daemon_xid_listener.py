"""The XID listener's life in a real agent: a listener that dies comes back at the next
collection where NVML answers (not after its 30 s pause), and where NVML's library is not
there none is forked at all (agent/daemon/loop.py), since its nvmlInit could only fail."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterdiag.agent.daemon.loop import LISTENER_RESTART_S
from clusterdiag.agent.read import nvml_library
from clusterdiag.agent.sim.node import build
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.writers.tree import write_tree

from .daemon_helpers import WAIT_S, AgentProc

_READY = re.compile(r"event=xid_listener_ready gpus=8 pid=(\d+)")


def _ready_pids(log: str) -> list[int]:
    return [int(pid) for pid in _READY.findall(log)]


@pytest.mark.slow
def test_a_killed_listener_is_back_at_the_next_collection(tmp_path: Path) -> None:
    agent = AgentProc(tmp_path, interval=0.5)
    try:
        agent.wait_ready()
        agent.wait_for(lambda: len(_ready_pids(agent.log())) == 1, "the listener's ready line")
        (first,) = _ready_pids(agent.log())
        os.kill(first, signal.SIGKILL)
        agent.wait_log("event=xid_listener_exited")
        agent.wait_for(lambda: len(_ready_pids(agent.log())) == 2, "a second listener",
                       timeout=LISTENER_RESTART_S - 5)
        second = _ready_pids(agent.log())[1]
        assert second != first
        os.kill(second, 0)  # running
    finally:
        assert agent.stop() == 0, agent.log()


@pytest.mark.slow
@pytest.mark.skipif(not nvml_library.missing(), reason="NVML's library is on this machine")
def test_no_listener_is_forked_while_nvmls_library_is_missing(tmp_path: Path) -> None:
    root, state, log = tmp_path / "root", tmp_path / "state", tmp_path / "agent.log"
    write_tree(build(NodeSpec("n1", "dgx-h100")), root)
    with open(log, "w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "clusterdiag.agent", "agent", "--root", str(root),
             "--node", "n1", "--profile", "dgx-h100", "--interval", "0.2", "--state-dir",
             str(state), "--listen", "127.0.0.1:0"],
            stdout=subprocess.DEVNULL, stderr=stderr, stdin=subprocess.DEVNULL,
            start_new_session=True)
        try:
            text = ""
            for _ in range(int(WAIT_S * 20)):
                text = log.read_text()
                if text.count("event=collected") >= 5 or proc.poll() is not None:
                    break
                time.sleep(0.05)
            assert text.count("event=collected") >= 5, text
            assert text.count("event=xid_listener_waiting") == 1, text
            assert nvml_library.LIBRARY in text
            assert "xid_listener_exited" not in text, text
            assert "xid_listener_ready" not in text, text
        finally:
            proc.terminate()
            proc.wait(WAIT_S)
