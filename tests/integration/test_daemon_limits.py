"""The agent's own limits, tried through the real command: a listen address already taken
(one line, exit 3), a connection flood against a low open-file limit (the node must still
be judged healthy and the prolog must still pass it), refreshes that must not starve
/healthz or /metrics, and the scrape paths a site may leave without the token."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from clusterdiag.agent.daemon.gate import HANDSHAKE_S
from tests.conftest import run_cli
from tests.integration.daemon_helpers import WAIT_S, AgentProc, get
from tests.integration.http_load import closed_by_peer, source_address
from tests.integration.test_daemon_security import cert  # noqa: F401 - a fixture
from tests.integration.test_prolog_cli import Slurm, slurm_run, write_config


def test_listen_address_in_use_is_one_line_and_exit_3(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_cli("agent", "--simulate", "dgx-h100", "--state-dir", str(tmp_path / "s"),
                       "--listen", f"127.0.0.1:{port}", "--interval", "5", timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    assert [line for line in lines if "level=" not in line] == [lines[-1]], proc.stderr
    assert lines[-1].startswith("clusterdiag: "), proc.stderr
    assert f"127.0.0.1:{port}" in lines[-1], lines[-1]
    assert "address already in use" in lines[-1], lines[-1]


NOFILE = 256  # the agent's open-file limit in the flood test: 1,000 connections would be 4x it
FLOOD_CLIENTS = 40  # source addresses 127.0.0.10 ... (one host could be held to PER_CLIENT)
FLOOD_PER_CLIENT = 25


def _flood(port: int, stop: threading.Event, held: list[socket.socket]) -> None:
    """Idle connections from many loopback addresses, reopened as the agent closes them,
    until ``stop``: what ~1,000 clients that never send a byte look like."""
    while not stop.is_set():
        for client in range(FLOOD_CLIENTS):
            for _ in range(FLOOD_PER_CLIENT):
                sock = socket.socket()
                sock.settimeout(0.5)
                try:
                    sock.bind((f"127.0.0.{10 + client}", 0))
                    sock.connect(("127.0.0.1", port))
                except OSError:
                    sock.close()
                    continue
                held.append(sock)
        stop.wait(1.0)
        alive = []
        for sock in held:  # drop the ones the agent closed, so they are opened again
            if closed_by_peer(sock):
                sock.close()
            else:
                alive.append(sock)
        held[:] = alive


@pytest.mark.slow
def test_a_connection_flood_under_a_low_fd_limit_leaves_the_node_healthy(tmp_path: Path
                                                                        ) -> None:
    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))

    state = tmp_path / "state"
    slurm = Slurm(tmp_path)
    (tmp_path / "spec.yaml").write_text("nodes:\n  - {names: n1, profile: dgx-h100}\n")
    write_config(tmp_path, slurm, prolog={"budget_s": 20, "max_report_age_s": 60})
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path / "agent.log").open("w")
    agent = subprocess.Popen(
        [sys.executable, "-m", "clusterdiag.agent", "agent", "--simulate",
         str(tmp_path / "spec.yaml"), "--node", "n1", "--state-dir", str(state),
         "--listen", f"127.0.0.1:{port}", "--interval", "1"],
        stdout=subprocess.DEVNULL, stderr=log, preexec_fn=low_limit, start_new_session=True)
    stop, held = threading.Event(), []  # type: ignore[var-annotated]
    flooder = threading.Thread(target=_flood, args=(port, stop, held), daemon=True)
    try:
        deadline = time.monotonic() + 30
        while not (state / "report.json").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (state / "report.json").exists(), (tmp_path / "agent.log").read_text()
        flooder.start()
        time.sleep(4.0)  # the flood is on
        opened = len(os.listdir(f"/proc/{agent.pid}/fd"))
        verdicts, started = [], set()
        begun = time.monotonic()
        # collections every second, flooded: at least 8 s of them, and (on a loaded
        # machine, where each takes longer) until three have ended, within a minute
        while time.monotonic() - begun < 8.0 or (
                len(started) < 3 and time.monotonic() - begun < 60.0):
            time.sleep(1.0)
            report = json.loads((state / "report.json").read_text())
            started.add(report["started_at"])
            verdicts.append((report["verdict"], [
                f"{f['check']} {f['component']} {f['message']}" for f in report["findings"]
                if f["status"] in ("fail", "error")][:3]))
        try:
            status = get(f"http://127.0.0.1:{port}/healthz", timeout=10)[0]
        except OSError as exc:
            status = str(exc)  # type: ignore[assignment]
        prolog = slurm_run("prolog", tmp_path, "n1")
    finally:
        stop.set()
        if flooder.is_alive():
            flooder.join(10)
        for sock in held:
            sock.close()
        agent.terminate()
        agent.wait(WAIT_S)
        log.close()
    text = (tmp_path / "agent.log").read_text()
    print(f"\nflood: {len(held)} connections held by the flooder, agent fds {opened} "
          f"(limit {NOFILE}); verdicts {[v for v, _ in verdicts]}")
    assert opened < NOFILE - 32, opened
    assert all(v == "pass" for v, _ in verdicts), verdicts
    assert len(started) >= 3, f"collections stalled under the flood: {started}"
    assert status == 200
    assert "Traceback" not in text
    assert prolog.returncode == 0, prolog.stderr
    assert "clusterdiag prolog: pass" in prolog.stderr, prolog.stderr
    assert 'source="agent report' in prolog.stderr, prolog.stderr
    assert slurm.updates() == []


MAX_REFRESHING = 4  # daemon/server.py: clients waiting for a refresh at once

HUNG = {"nodes": [{"names": "n1", "profile": "dgx-h100"}],
        "faults": [{"node": "n1", "kind": "gpu_hang", "gpu": 4}]}  # each collection ~6 s


@pytest.mark.slow
def test_refreshes_never_starve_healthz_or_metrics(tmp_path: Path) -> None:
    agent = AgentProc(tmp_path, spec=HUNG, interval=600,
                      config={"agent": {"refresh_min_interval_s": 0}})
    try:
        url = agent.wait_ready(timeout=60)
        agent.wait_log("event=collected why=start", timeout=30)
        with ThreadPoolExecutor(40) as pool:
            refreshes = [pool.submit(get, f"{url}/v1/report?refresh=1", None, "GET", 30)
                         for _ in range(16)]
            time.sleep(0.5)  # the refreshes are in, a collection is running
            probes = []
            for _ in range(12):
                probes += [pool.submit(get, f"{url}{p}", None, "GET", 10)
                           for p in ("/metrics", "/healthz")]
                time.sleep(0.1)
            statuses = [f.result()[0] for f in probes]
            refreshed = [f.result()[0] for f in refreshes]
    finally:
        agent.stop()
    print(f"\nprobes {statuses}; refreshes {refreshed}")
    assert statuses == [200] * len(probes), statuses
    assert refreshed.count(200) >= 1, refreshed
    assert set(refreshed) <= {200, 429}, refreshed
    assert refreshed.count(429) >= 15 - MAX_REFRESHING, refreshed  # one waits per client


def _token(tmp_path: Path) -> Path:
    token = tmp_path / "token"
    token.write_text("limits-test-token-0123456789abcdef")
    token.chmod(0o600)
    return token


def test_a_site_may_leave_metrics_open_and_keep_the_token_elsewhere(tmp_path: Path) -> None:
    agent = AgentProc(tmp_path, config={"agent": {"token_file": str(_token(tmp_path)),
                                                  "unauthenticated_paths": ["/metrics"]}})
    try:
        url = agent.wait_ready()
        assert get(f"{url}/metrics")[0] == 200
        assert get(f"{url}/healthz")[0] == 200
        for path in ("/v1/report", "/v1/snapshot", "/v1/report?refresh=1"):
            assert get(f"{url}{path}")[0] == 401, path
    finally:
        agent.stop()


@pytest.mark.parametrize("path", ["/v1/report", "/v1/clear/all", "/", "metrics"])
def test_only_the_scrape_and_health_paths_may_be_left_open(tmp_path: Path, path: str) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps({"agent": {"token_file": str(_token(tmp_path)),
                                            "unauthenticated_paths": ["/metrics", path]}}))
    proc = run_cli("agent", "--simulate", "dgx-h100", "--config", str(config),
                   "--state-dir", str(tmp_path / "s"), "--listen", "127.0.0.1:0", timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "agent.unauthenticated_paths" in lines[0]
    assert "/metrics" in lines[0]


def test_an_unfinished_tls_handshake_is_cut_off(tmp_path: Path,
                                                cert: tuple[Path, Path],  # noqa: F811
                                                ) -> None:
    """Connections that never send a ClientHello (or stop halfway through one) are closed
    within the gate's handshake limit, not asyncio's 60 s, and cost no slot meanwhile."""
    crt, key = cert
    agent = AgentProc(tmp_path, config={"agent": {"tls_cert": str(crt), "tls_key": str(key)}},
                      interval=30)
    try:
        host, port = agent.wait_ready()[7:].rsplit(":", 1)
        socks = []
        for i in range(40):
            sock = socket.create_connection((host, int(port)), timeout=50,
                                            source_address=(source_address(i * 8), 0))
            if i % 2:
                sock.sendall(bytes.fromhex("1603010200010001fc0303"))  # half a ClientHello
            socks.append(sock)
        started = time.monotonic()
        for sock in socks:
            with contextlib.suppress(ConnectionResetError):
                assert sock.recv(100) == b""
        took = time.monotonic() - started
        for sock in socks:
            sock.close()
    finally:
        agent.stop()
    assert took < HANDSHAKE_S + 25.0, took  # asyncio's own limit would be 60 s
