"""A flood of idle connections from more addresses than the agent's connection budget:
the longest-idle connection makes room, so /healthz keeps answering."""

from __future__ import annotations

import json
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from clusterdiag.agent.daemon.gate import FD_RESERVE
from tests.integration.daemon_helpers import WAIT_S, get
from tests.integration.http_load import closed_by_peer

CAP = 40  # the agent's connection budget here, from its open-file limit
ADDRESSES = 60  # one idle connection each: half again the budget
RECONNECT_S = 0.5


def _hold(port: int, stop: threading.Event, made: list[int]) -> None:
    """One idle connection from each of 127.0.2.1 ... , reopened RECONNECT_S after the
    agent closes it, until ``stop``."""
    socks: dict[int, socket.socket] = {}
    closed_at: dict[int, float] = {}
    while not stop.wait(0.05):
        for i in range(ADDRESSES):
            sock = socks.get(i)
            if sock is not None:
                if closed_by_peer(sock):
                    sock.close()
                    del socks[i]
                    closed_at[i] = time.monotonic()
            elif time.monotonic() - closed_at.get(i, 0.0) >= RECONNECT_S:
                sock = socket.socket()
                sock.settimeout(1.0)
                try:
                    sock.bind((f"127.0.2.{1 + i}", 0))
                    sock.connect(("127.0.0.1", port))
                except OSError:
                    sock.close()
                    closed_at[i] = time.monotonic()
                    continue
                sock.setblocking(False)
                socks[i] = sock
                made[0] += 1
    for sock in socks.values():
        sock.close()


@pytest.mark.slow
def test_healthz_answers_while_more_addresses_than_the_budget_hold_idle_connections(
        tmp_path: Path) -> None:
    def low_limit() -> None:
        limit = CAP + FD_RESERVE
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    state = tmp_path / "state"
    log = (tmp_path / "agent.log").open("w")
    agent = subprocess.Popen(
        [sys.executable, "-m", "clusterdiag.agent", "agent", "--simulate", "dgx-h100",
         "--state-dir", str(state), "--listen", "127.0.0.1:0", "--interval", "30"],
        stdout=subprocess.DEVNULL, stderr=log, preexec_fn=low_limit, start_new_session=True)
    stop, made = threading.Event(), [0]
    try:
        deadline = time.monotonic() + WAIT_S
        while not (state / "report.json").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (state / "report.json").exists(), (tmp_path / "agent.log").read_text()
        port = int(json.loads((state / "agent.json").read_text())["listen"].rsplit(":", 1)[1])
        flooder = threading.Thread(target=_hold, args=(port, stop, made), daemon=True)
        flooder.start()
        while made[0] < ADDRESSES and time.monotonic() < deadline:
            time.sleep(0.1)  # every address has had its connection
        answers = []
        for _ in range(10):
            try:
                answers.append(get(f"http://127.0.0.1:{port}/healthz", timeout=10)[0])
            except OSError as exc:
                answers.append(type(exc).__name__)  # type: ignore[arg-type]
            time.sleep(0.2)
    finally:
        stop.set()
        agent.terminate()
        agent.wait(WAIT_S)
        log.close()
    assert made[0] >= ADDRESSES
    assert answers == [200] * 10, answers
    assert "Traceback" not in (tmp_path / "agent.log").read_text()
