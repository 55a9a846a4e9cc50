"""The real agent process on loopback: report and state contract, XID events through the
simulated NVML, sticky findings and clearing, SIGHUP, SIGTERM, metrics through promtool."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.integration.daemon_helpers import XID_SPEC, AgentProc, get, write_yaml

TOKEN = "s3cret-token-for-tests-0123456789"


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return path


def test_report_state_contract_and_clean_sigterm(tmp_path: Path) -> None:
    agent = AgentProc(tmp_path, interval=0.5)
    try:
        url = agent.wait_ready()
        status, body, headers = get(f"{url}/v1/report")
        assert status == 200
        assert headers["Content-Type"].startswith("application/json")
        report = json.loads(body)
        assert report["schema"] == "clusterdiag/node-report/v1"
        assert report["mode"] == "agent"
        on_disk = json.loads((agent.state / "report.json").read_text())
        assert set(on_disk) == set(report)
        meta = json.loads((agent.state / "agent.json").read_text())
        assert meta == {"interval_s": 0.5, "pid": agent.proc.pid, "listen": url[7:]}
        assert get(f"{url}/healthz")[0] == 200
        snap = json.loads(get(f"{url}/v1/snapshot")[1])
        assert snap["schema"] == "clusterdiag/snapshot/v2"
        log = agent.wait_log("why=interval")
        # the second collection had the first as its earlier sample: rates are real
        rates = [f for f in json.loads(get(f"{url}/v1/report")[1])["findings"]
                 if f["check"] == "gpu.ecc_corrected_rate"]
        assert rates
        assert all(f["status"] == "pass" and f["observed"]["seconds"] > 0 for f in rates)
    finally:
        code = agent.stop()
    assert code == 0
    log = agent.log()
    assert "event=stopped" in log
    assert "Traceback" not in log
    assert all(re.match(r"^level=\w+ event=\S+", line) for line in log.splitlines()), log


def test_xid_event_is_recorded_sticky_and_cleared(tmp_path: Path, token_file: Path) -> None:
    config = {"agent": {"token_file": str(token_file)}, "checks": {"gpu.xid": {"window_s": 2}}}
    agent = AgentProc(tmp_path, spec=XID_SPEC, config=config, interval=0.5)
    try:
        url = agent.wait_ready()
        log = agent.wait_log("event=xid_recorded")
        event_id = re.search(r"event=xid_recorded id=(\S+)", log)[1]  # type: ignore[index]
        events = json.loads((agent.state / "events.json").read_text())["events"]
        assert [e["id"] for e in events] == [event_id]
        # after gpu.xid's 2 s window the agent itself keeps the finding, saying why: the
        # first report judged past the window (however long collections take) has it
        def failing() -> list[dict[str, Any]]:
            report = json.loads(get(f"{url}/v1/report", TOKEN)[1])
            return [f for f in report["findings"] if f["check"] == "gpu.xid"
                    and f["component"] == "gpu2" and f["status"] == "fail"]

        agent.wait_for(lambda: any("still_here_because" in f["observed"] for f in failing()),
                       "gpu.xid kept past its window")
        report = json.loads(get(f"{url}/v1/report", TOKEN)[1])
        sticky = [f for f in report["findings"] if f["check"] == "gpu.xid"
                  and f["component"] == "gpu2" and f["status"] == "fail"]
        assert sticky, report["findings"]  # and every later report keeps it
        assert sticky[0]["observed"]["event"] == event_id
        assert "still_here_because" in sticky[0]["observed"]
        assert report["verdict"] == "fail"
        # metrics count the event by code
        metrics = get(f"{url}/metrics", TOKEN)[1].decode()
        xid = [line for line in metrics.splitlines()
               if line.startswith("clusterdiag_xid_events_total{")]
        assert len(xid) == 1, xid
        for label in ('code="79"', 'gpu="2"', 'device="nvidia2"'):
            assert label in xid[0], xid
        assert xid[0].endswith(" 1.0")
        # clear needs the token; a wrong id is 404; the right one clears
        assert get(f"{url}/v1/clear/{event_id}", method="POST")[0] == 401
        assert get(f"{url}/v1/clear/nope-1", TOKEN, method="POST")[0] == 404
        status, body, _ = get(f"{url}/v1/clear/{event_id}", TOKEN, method="POST")
        assert status == 200
        assert json.loads(body) == {"cleared": [event_id]}
        agent.wait_log("event=collected why=clear")  # logged once HTTP serves its report
        report = json.loads(get(f"{url}/v1/report", TOKEN)[1])
        assert not [f for f in report["findings"] if f["check"] == "gpu.xid"
                    and f["status"] == "fail"]
        saved = json.loads((agent.state / "events.json").read_text())["events"][0]
        assert saved["cleared"]["why"] == "cleared over the API"
    finally:
        assert agent.stop() == 0


def test_clear_from_the_command_line_with_and_without_agent(tmp_path: Path) -> None:
    agent = AgentProc(tmp_path, spec=XID_SPEC, interval=0.5)
    try:
        agent.wait_ready()
        log = agent.wait_log("event=xid_recorded")
        event_id = re.search(r"event=xid_recorded id=(\S+)", log)[1]  # type: ignore[index]
        bad = run_cli("agent", "--state-dir", str(agent.state), "--clear", "xid1-gpu0-1")
        assert bad.returncode == 2
        assert "no active event" in bad.stderr
        done = run_cli("agent", "--state-dir", str(agent.state), "--clear", event_id)
        assert done.returncode == 0, done.stderr
        assert "by the running agent" in done.stdout
        agent.wait_log("event=xid_cleared")
    finally:
        assert agent.stop() == 0
    # stopped: the next restart re-delivers the scheduled event (a new id); clear it offline
    events = json.loads((agent.state / "events.json").read_text())["events"]
    assert events[0]["cleared"]["why"] == "cleared with clusterdiag agent --clear"


def test_sighup_reload_applies_good_config_and_refuses_bad(tmp_path: Path) -> None:
    config_path = write_yaml(tmp_path / "config.yaml", {"agent": {"interval_s": 5}})
    agent = AgentProc(tmp_path, "--config", str(config_path))
    try:
        url = agent.wait_ready()
        assert 'Hostname="renamed-host"' not in get(f"{url}/metrics")[1].decode()
        write_yaml(config_path, {"agent": {"interval_s": 7}, "bogus": 1})
        agent.signal(signal.SIGHUP)
        log = agent.wait_log("event=config_reload_refused")
        assert "unknown key 'bogus'" in log
        assert agent.proc.poll() is None
        write_yaml(config_path, {"agent": {"interval_s": 7},
                                 "metrics": {"hostname": "renamed-host"}})
        agent.signal(signal.SIGHUP)
        agent.wait_log("event=config_reloaded")
        metrics = get(f"{url}/metrics")[1].decode()  # the next scrape, no collection needed
        temps = [line for line in metrics.splitlines()
                 if line.startswith("clusterdiag_gpu_temperature_celsius{")]
        assert temps
        assert all('Hostname="renamed-host"' in line for line in temps), temps[:2]
    finally:
        assert agent.stop() == 0


def test_refresh_is_rate_limited(tmp_path: Path) -> None:
    agent = AgentProc(tmp_path, interval=60, config={"agent": {"refresh_min_interval_s": 30}})
    try:
        url = agent.wait_ready()
        agent.wait_log("event=collected why=start")  # else the refresh joins that one
        status, _, headers = get(f"{url}/v1/report?refresh=1")
        assert status == 429
        assert int(headers["Retry-After"]) > 0
        assert get(f"{url}/v1/report")[0] == 200
    finally:
        agent.stop()


def test_refresh_runs_a_collection(tmp_path: Path) -> None:
    agent = AgentProc(tmp_path, interval=60, config={"agent": {"refresh_min_interval_s": 0}})
    try:
        url = agent.wait_ready()
        # report.json is on disk before the first collection has finished its other
        # writes; a refresh then (rightly) waits for that one instead of starting its own
        agent.wait_log("event=collected why=start")
        assert get(f"{url}/v1/report?refresh=1")[0] == 200
        agent.wait_log("why=refresh")
    finally:
        agent.stop()


def _series(text: str) -> list[str]:
    return [line.rsplit(" ", 1)[0] for line in text.splitlines()
            if line and not line.startswith("#")]


def test_metrics_are_prefixed_unique_and_pass_promtool(tmp_path: Path) -> None:
    agent = AgentProc(tmp_path, spec=XID_SPEC, interval=0.5)
    try:
        url = agent.wait_ready()
        agent.wait_log("event=xid_recorded")
        agent.wait_log("why=interval")
        status, body, headers = get(f"{url}/metrics")
    finally:
        agent.stop()
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain")
    text = body.decode()
    series = _series(text)
    dupes = [s for s, n in Counter(series).items() if n > 1]
    assert not dupes
    names = {re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", s)[0] for s in series}  # type: ignore[index]
    assert names
    assert all(n.startswith("clusterdiag_") for n in names), names
    for wanted in ("clusterdiag_gpu_temperature_celsius", "clusterdiag_gpu_power_watts",
                   "clusterdiag_gpu_ecc_errors_total", "clusterdiag_gpu_nvlink_up",
                   "clusterdiag_xid_events_total", "clusterdiag_check_status",
                   "clusterdiag_collection_duration_seconds", "clusterdiag_nvml_calls_total"):
        assert wanted in names, wanted
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (CI installs Debian's prometheus)")
    proc = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                          text=True, check=False)
    # One lint is deliberate: dcgm-exporter's label is spelled modelName, and the GPU series
    # must spell it the same to join with DCGM's (its own exposition draws the same lint).
    # Anything else (rc 1 is a parse error) fails.
    lints = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    camel = "label names should be written in 'snake_case' not 'camelCase'"
    assert proc.returncode in (0, 3), lints
    assert all(line.endswith(camel) for line in lints), lints
    camel_labels = {m for m in re.findall(r'[{,]([a-zA-Z_]+)="', text)
                    if re.search(r"[a-z][A-Z]", m)}
    assert camel_labels == {"modelName"}
