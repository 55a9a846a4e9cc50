"""Soak (opt-in: ``-m soak``, about 3 minutes): a simulated dgx-h100 whose faults come and
go on a schedule (``from_s``/``until_s``, sim/schedule.py). The reported state must follow
every fault on and off again, and the agent must not grow in memory or open files."""

from __future__ import annotations

import json
import statistics
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.integration.daemon_helpers import AgentProc, get
from tests.integration.http_load import open_fds, rss_kib

DURATION_S = 180.0
CYCLE_S = 60.0
NODE = "soak1"
# (fault, its check, the component that must fail, on, off in each cycle): one read through
# NVML device queries, one through sysfs, one through NVML's per-link state.
FAULTS = [
    ({"kind": "gpu_hot", "gpu": 3}, "gpu.temperature", "gpu3", 10, 35),
    ({"kind": "ib_port_down", "hca": "mlx5_4"}, "ib.port_state", "mlx5_4/1", 25, 50),
    ({"kind": "nvlink_down", "gpu": 5, "link": 2}, "nvlink.links_up", "gpu5", 40, 55),
]
SLACK_S = 2.5  # times are whole seconds in the report, and a change lands at the next sample
GROWTH_KIB = 4 * 1024
GROWTH_FRACTION = 0.05


def _spec() -> dict[str, Any]:
    faults = []
    for cycle in range(int(DURATION_S // CYCLE_S) + 1):
        for fault, _, _, on, off in FAULTS:
            faults.append({"node": NODE, **fault, "from_s": cycle * CYCLE_S + on,
                           "until_s": cycle * CYCLE_S + off})
    return {"nodes": [{"names": NODE, "profile": "dgx-h100"}], "faults": faults}


def _on(elapsed: float, on: float, off: float) -> bool | None:
    """Whether the fault is on at ``elapsed``; None within SLACK_S of a change."""
    phase = elapsed % CYCLE_S
    if min(abs(phase - on), abs(phase - off)) < SLACK_S:
        return None
    return on <= phase < off


@pytest.mark.soak
def test_faults_come_and_go_and_nothing_grows(tmp_path: Path,
                                              request: pytest.FixtureRequest) -> None:
    if "soak" not in (request.config.option.markexpr or ""):
        pytest.skip("minutes long: run with -m soak")
    agent = AgentProc(tmp_path, spec=_spec(), interval=2)
    samples: list[tuple[float, int, int]] = []  # (elapsed, rss KiB, fds)
    seen: dict[str, list[tuple[float, bool]]] = {check: [] for _, check, _, _, _ in FAULTS}
    started: set[str] = set()
    try:
        url = agent.wait_ready()
        snap = json.loads(get(f"{url}/v1/snapshot")[1])
        epoch = snap["host"]["boot_time"] + 86_400  # the simulated node booted a day before
        pid = agent.proc.pid
        while time.time() - epoch < DURATION_S:
            time.sleep(1.0)
            samples.append((time.time() - epoch, rss_kib(pid), open_fds(pid)))
            assert get(f"{url}/metrics")[0] == 200
            status, body, _ = get(f"{url}/v1/report")
            assert status == 200
            report = json.loads(body)
            if report["started_at"] in started:
                continue
            started.add(report["started_at"])
            elapsed = datetime.fromisoformat(report["started_at"]).timestamp() - epoch
            for _, check, component, _, _ in FAULTS:
                failing = any(f["check"] == check and f["component"] == component
                              and f["status"] == "fail" for f in report["findings"])
                seen[check].append((elapsed, failing))
            others = [f"{f['check']}:{f['component']}" for f in report["findings"]
                      if f["status"] in ("fail", "error")
                      and (f["check"], f["component"]) not in {(c, n) for _, c, n, _, _ in FAULTS}]
            assert not others, f"at {elapsed:.0f} s: {others}"
    finally:
        assert agent.stop() == 0
    assert "Traceback" not in agent.log()

    for _, check, component, on, off in FAULTS:
        timeline = seen[check]
        wrong = [(round(t), failing) for t, failing in timeline
                 if _on(t, on, off) is not None and _on(t, on, off) != failing]
        assert not wrong, f"{check} {component} did not follow its schedule: {wrong}"
        cycles = int(DURATION_S // CYCLE_S)
        for cycle in range(cycles):
            base = cycle * CYCLE_S
            assert any(failing for t, failing in timeline if base + on < t < base + off), \
                f"{check}: never failing in cycle {cycle}"
            assert any(not failing for t, failing in timeline
                       if base + off + SLACK_S < t < base + CYCLE_S + on), \
                f"{check}: did not pass again after cycle {cycle}"

    # memory and descriptors: the last minute against the first after warm-up
    early = [s for s in samples if 20 <= s[0] < 60]
    late = [s for s in samples if s[0] >= DURATION_S - 40]
    rss_early = statistics.median(s[1] for s in early)
    rss_late = statistics.median(s[1] for s in late)
    print(f"\n{len(started)} reports; RSS {rss_early / 1024:.1f} -> {rss_late / 1024:.1f} MiB; "
          f"fds {min(s[2] for s in samples)}..{max(s[2] for s in samples)}")
    assert rss_late <= max(rss_early * (1 + GROWTH_FRACTION), rss_early + GROWTH_KIB)
    assert max(s[2] for s in late) <= max(s[2] for s in early) + 1
