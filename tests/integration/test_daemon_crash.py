"""Crash safety: SIGKILL at random points across many restarts loses no persisted event and
never stops the agent from starting again; a state directory that fills up or turns
read-only after start is reported, the agent keeps serving from memory, and it persists
again once the disk is back."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.sim.node import sweep_orphans
from tests.integration.daemon_helpers import WAIT_S, AgentProc, get

ROUNDS = 25
NODE = f"crash{os.getpid()}"  # its own name, so the sim trees killed agents leave are ours


def _xid_spec(count: int, start_s: float, step_s: float) -> dict[str, Any]:
    return {"nodes": [{"names": NODE, "profile": "dgx-h100"}],
            "faults": [{"node": NODE, "kind": "xid", "gpu": i % 8, "code": 48 if i % 2 else 79,
                        "at_s": round(start_s + step_s * i, 2)} for i in range(count)]}


@pytest.fixture
def sim_trees() -> Iterator[None]:
    """A SIGKILLed agent cannot remove its simulated /sys tree (an atexit job): do it."""
    yield
    sweep_orphans(Path("/dev/shm"))


def _saved_ids(state: Path) -> list[str]:
    path = state / "events.json"
    return [e["id"] for e in json.loads(path.read_text())["events"]] if path.exists() else []


# Where each round's kill lands. The moments are chosen by what the agent has done, not by
# how long it has run, so a slow (loaded) machine still kills it in every phase:
# "starting" anywhere from importing to the first collection, "up" once it wrote agent.json,
# "recording" once it has logged an XID event (and is writing more).
PHASES = ("starting", "up", "recording")


@pytest.mark.slow
def test_sigkill_at_random_points_loses_nothing_and_always_restarts(
        tmp_path: Path, sim_trees: None) -> None:
    seed = int(os.environ.get("CLUSTERDIAG_CRASH_SEED", time.time_ns() % 10**6))
    print(f"\nseed {seed} (CLUSTERDIAG_CRASH_SEED reruns it)")
    rng = random.Random(seed)
    spec = _xid_spec(40, 0.15, 0.07)  # an XID every 70 ms while a collection runs each 0.1 s
    recorded: set[str] = set()
    for round_ in range(ROUNDS):
        phase = PHASES[round_ % len(PHASES)]
        agent = AgentProc(tmp_path, spec=spec, interval=0.1)
        if phase == "up":
            agent.wait_for(agent.is_up, "agent.json")
        elif phase == "recording":
            agent.wait_log("event=xid_recorded ")
        delay = rng.uniform(0.02, 0.8)
        time.sleep(delay)
        agent.signal(signal.SIGKILL)
        agent.proc.wait(WAIT_S)
        agent.stop()
        log = agent.log()
        assert "Traceback" not in log, log
        assert "state_corrupt" not in log, log
        assert "state_events_dropped" not in log, log
        recorded |= set(re.findall(r"event=xid_recorded id=(\S+)", log))
        for name in ("events.json", "report.json", "snapshot.json", "agent.json"):
            path = agent.state / name
            if path.exists():
                json.loads(path.read_text())  # whole, never half-written
        saved = _saved_ids(agent.state)
        assert len(saved) == len(set(saved)), "an event saved twice"
        missing = recorded - set(saved)
        assert not missing, f"round {round_} ({phase}, killed {delay:.2f} s on): lost {missing}"
    print(f"{ROUNDS} kills, {len(recorded)} events recorded")
    assert len(recorded) >= 3  # "recording" rounds were killed while events were written
    agent = AgentProc(tmp_path, spec=spec, interval=1.0)
    try:
        url = agent.wait_ready()
        assert get(f"{url}/healthz")[0] == 200
        agent.wait_log("event=collected")
        assert set(_saved_ids(agent.state)) >= recorded
    finally:
        assert agent.stop() == 0
    assert not list(agent.state.glob(".tmp-*"))


def _mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0750", "tmpfs",
                           str(path)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for the state directory (needs root with "
                    f"CAP_SYS_ADMIN): {proc.stderr.strip()[:120]}")


@pytest.fixture
def small_state(tmp_path: Path) -> Iterator[Path]:
    """The agent's state directory on its own 1 MiB tmpfs: room for its files (~160 KB on
    dgx-h100, twice that while a file is replaced), and quick to fill."""
    state = tmp_path / "state"
    _mount_tmpfs(state, "1m")
    try:
        yield state
    finally:
        subprocess.run(["umount", "-l", str(state)], capture_output=True, check=False)


def _fill(directory: Path) -> Path:
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as out, contextlib.suppress(OSError):  # ENOSPC: full
        while True:
            out.write(b"\0" * 4096)
    return filler


def _report(url: str) -> dict[str, Any]:
    status, body, _ = get(f"{url}/v1/report")
    assert status == 200
    return json.loads(body)  # type: ignore[no-any-return]


def _state_findings(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["check"] == "agent.state_dir"]


def _wait(what: str, predicate: Any, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _metric(url: str, name: str) -> float:
    text = get(f"{url}/metrics")[1].decode()
    return float(re.search(rf"^{name} (\S+)$", text, re.M)[1])  # type: ignore[index]


def _outage(agent: AgentProc, break_it: Any, mend_it: Any, errno_name: str) -> None:
    """Break the disk after start; the agent must say so and keep serving; mend it; the
    agent must persist again, including an XID event that arrived during the outage."""
    url = agent.wait_ready()
    agent.wait_log("why=interval")
    break_it()
    assert "event=xid_recorded" not in agent.log(), "the XID came before the disk broke"
    log = agent.wait_log("event=state_write_failed")
    line = next(x for x in log.splitlines() if "event=state_write_failed" in x)
    assert f"errno={getattr(__import__('errno'), errno_name)}" in line, line
    _wait("the report to carry the condition", lambda: _state_findings(_report(url)))
    finding = _state_findings(_report(url))[0]
    assert finding["status"] == "warn"
    assert finding["observed"]["state_dir"] == str(agent.state)
    assert _metric(url, "clusterdiag_state_writable") == 0
    assert _metric(url, "clusterdiag_state_write_errors_total") >= 1
    # still serving, and from fresh collections, not a frozen last report
    first = _report(url)["started_at"]
    _wait("a newer report while the disk is broken", lambda: _report(url)["started_at"] > first)
    assert get(f"{url}/healthz")[0] == 200
    assert not list(agent.state.glob(".tmp-*")), "a failed write left its temp file behind"
    log = agent.wait_log("event=xid_recorded_in_memory")
    event_id = re.search(r"event=xid_recorded_in_memory id=(\S+)", log)[1]  # type: ignore[index]
    assert event_id not in _saved_ids(agent.state)
    assert log.count("event=state_write_failed") == 1  # once per outage, not once a write
    assert agent.proc.poll() is None

    mended_at = time.time()
    mend_it()
    agent.wait_log("event=state_write_recovered")
    _wait("the outage's event on disk", lambda: event_id in _saved_ids(agent.state))
    _wait("a report on disk from after the outage", lambda: json.loads(
        (agent.state / "report.json").read_text())["started_at"] > _iso(mended_at))
    _wait("the condition to leave the report", lambda: not _state_findings(_report(url)))
    assert _metric(url, "clusterdiag_state_writable") == 1


# The outage's XID: due this long after the simulated node is built, which must be after
# the disk broke (start-up, the first collections and the break take a few seconds, and
# several more on a loaded CI machine).
OUTAGE_XID_AT_S = 20.0


def _iso(timestamp: float) -> str:
    from clusterdiag.reports.model.node import iso

    return iso(int(timestamp))


@pytest.mark.slow
def test_full_disk_after_start_is_reported_and_survived(tmp_path: Path, small_state: Path,
                                                        sim_trees: None) -> None:
    agent = AgentProc(tmp_path, spec=_xid_spec(1, OUTAGE_XID_AT_S, 0), interval=0.5)
    filler: list[Path] = []
    try:
        _outage(agent, lambda: filler.append(_fill(small_state)),
                lambda: filler[0].unlink(), "ENOSPC")
    finally:
        assert agent.stop() == 0
    assert "Traceback" not in agent.log()


@pytest.mark.slow
def test_read_only_state_dir_after_start_is_reported_and_survived(
        tmp_path: Path, small_state: Path, sim_trees: None) -> None:
    def remount(mode: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{mode}", str(small_state)], check=True)

    agent = AgentProc(tmp_path, spec=_xid_spec(1, OUTAGE_XID_AT_S, 0), interval=0.5)
    try:
        _outage(agent, lambda: remount("ro"), lambda: remount("rw"), "EROFS")
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            remount("rw")
        assert agent.stop() == 0
    assert "Traceback" not in agent.log()
