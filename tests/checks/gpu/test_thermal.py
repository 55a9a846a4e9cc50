"""gpu.temperature, gpu.clock_events, gpu.clocks, gpu.power_limit
(checks/gpu/thermal.py)."""

from __future__ import annotations

from typing import Any

import pytest

from clusterdiag.agent.model import Snapshot
from clusterdiag.checks.core.finding import Action, Status
from tests.checks.gpu.factory import GENERIC, NOW, bad, make_gpu, make_snap, only, run


def test_temperature() -> None:
    gpus = [make_gpu(0), make_gpu(1, temperature_c=86), make_gpu(2, temperature_c=89),
            make_gpu(3, memory_temperature_c=96),
            make_gpu(4, slowdown_temperature_c=None,
                     unsupported={"slowdown_temperature_c": "NotSupported"},
                     memory_temperature_c=None)]
    findings = run("gpu.temperature", make_snap(gpus))
    got = [(f.component, f.status) for f in findings if f.status is not Status.PASS]
    assert got == [("gpu1", Status.WARN), ("gpu2", Status.FAIL), ("gpu3", Status.WARN),
                   ("gpu4", Status.SKIP)]
    assert only(findings, Status.WARN)[0].observed["margin_c"] == 3
    assert not bad(run("gpu.temperature", make_snap([gpus[1]]), min_slowdown_margin_c=2))


@pytest.mark.parametrize(("mask", "statuses"), [
    (0x1, [Status.PASS]), (0x4, [Status.PASS]), (0x2 | 0x10, [Status.PASS]),
    (0x40 | 0x8, [Status.FAIL]), (0x80 | 0x8, [Status.FAIL]), (0x8, [Status.WARN]),
    (0x20, [Status.WARN]), (0x80 | 0x40, [Status.FAIL, Status.FAIL])])
def test_clock_events(mask: int, statuses: list[Status]) -> None:
    findings = run("gpu.clock_events", make_snap([make_gpu(0, clock_event_reasons=mask)]))
    assert [f.status for f in findings] == statuses
    assert all(f.action is Action.INVESTIGATE for f in bad(findings))


def test_clock_events_sustained_hw_slowdown_fails() -> None:
    prev = make_snap([make_gpu(0, clock_event_reasons=0x8)], taken_at=NOW - 60)
    findings = run("gpu.clock_events", make_snap([make_gpu(0, clock_event_reasons=0x8)]),
                   previous=prev)
    assert [f.status for f in findings] == [Status.FAIL]
    assert findings[0].observed["reasons"] == ["hw_slowdown"]


@pytest.mark.parametrize(("changes", "status"), [
    ({}, Status.PASS),  # idle at 345 MHz with no clock setting: not judged
    ({"clock_event_reasons": 0x0, "sm_clock_mhz": 1980}, Status.PASS),  # busy at its max
    ({"clock_event_reasons": 0x2, "sm_clock_mhz": 1980}, Status.PASS),  # app clocks at max
    ({"clock_event_reasons": 0x2, "sm_clock_mhz": 1900}, Status.PASS),  # within 5 %
    ({"clock_event_reasons": 0x2, "sm_clock_mhz": 1410}, Status.WARN),  # locked low
    ({"clock_event_reasons": 0x3, "sm_clock_mhz": 1200}, Status.WARN),  # locked, idle too
    ({"sm_clock_mhz": None, "unsupported": {"sm_clock_mhz": "NotSupported"}}, Status.SKIP),
])
def test_clocks_held_below_max(changes: dict[str, Any], status: Status) -> None:
    findings = run("gpu.clocks", make_snap([make_gpu(0, **changes)]))
    assert [f.status for f in findings] == [status]
    if status is Status.WARN:
        assert findings[0].action is Action.FIX_CONFIG
        assert findings[0].observed["max_mhz"] == 1980


def _slowdown(ns: int, taken_at: float) -> Snapshot:
    times = {"sw_thermal": 0, "hw_thermal": ns, "hw_power_brake": 0}
    return make_snap([make_gpu(0, clock_event_time_ns=times)], taken_at=taken_at)


def test_clocks_slowdown_time_growing_across_samples_warns() -> None:
    # 6 s of HW thermal slowdown in a minute (10 %), though no sample caught it active.
    grown = run("gpu.clocks", _slowdown(6_000_000_000, NOW), previous=_slowdown(0, NOW - 60))
    assert [(f.status, f.action) for f in grown] == [(Status.WARN, Action.INVESTIGATE)]
    assert grown[0].observed["slowdown_ns"] == {"hw_thermal": 6_000_000_000}
    little = run("gpu.clocks", _slowdown(1_000_000_000, NOW), previous=_slowdown(0, NOW - 60))
    assert [f.status for f in little] == [Status.PASS]  # 1.7 %
    # A counter that went backwards (driver reload) proves nothing; one sample proves nothing.
    back = run("gpu.clocks", _slowdown(0, NOW), previous=_slowdown(9_000_000_000, NOW - 60))
    assert [f.status for f in back] == [Status.PASS]
    assert [f.status for f in run("gpu.clocks", _slowdown(6_000_000_000, NOW))] == [
        Status.PASS]


def test_power_limit() -> None:
    gpus = [make_gpu(0), make_gpu(1, power_limit_w=400.0), make_gpu(2, power_limit_w=680.0)]
    findings = run("gpu.power_limit", make_snap(gpus))
    assert [(f.status, f.action) for f in findings] == [
        (Status.PASS, Action.NONE), (Status.WARN, Action.FIX_CONFIG), (Status.PASS, Action.NONE)]
    assert findings[1].message == "power capped below the expected limit"
    assert not bad(run("gpu.power_limit", make_snap(gpus), expected_w=400))


def test_power_limit_without_profile_uses_the_default_limit() -> None:
    gpu = make_gpu(0, power_limit_w=300.0, power_default_limit_w=350.0)
    findings = run("gpu.power_limit", make_snap([gpu]), GENERIC)
    assert [f.status for f in findings] == [Status.WARN]
    assert findings[0].expected == ">= 350 W"
