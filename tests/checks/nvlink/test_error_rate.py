"""nvlink.error_rate (checks/nvlink/error_rate.py)."""

from __future__ import annotations

import copy

from clusterdiag.agent.model import Snapshot
from clusterdiag.checks.core.finding import Action, Status
from tests.checks.nvlink.factory import NOW, by_status, judge, make_snapshot, one

# --- nvlink.error_rate ----------------------------------------------------------------

def counters_after(platform: str, dt: float, gpu: int, link: int, **grow: int
                   ) -> tuple[Snapshot, Snapshot]:
    before = make_snapshot(platform, taken_at=NOW - dt)
    after = copy.deepcopy(before)
    after.taken_at = NOW
    assert after.nvml is not None
    for name, value in grow.items():
        after.nvml.gpus[gpu].nvlinks[link].errors[name] += value
    return before, after


def test_error_rate_skips_without_an_earlier_sample() -> None:
    finding = one(judge("nvlink.error_rate", make_snapshot()))
    assert finding.status is Status.SKIP
    assert "earlier sample" in finding.message


def test_error_rate_passes_with_quiet_counters() -> None:
    before, after = counters_after("dgx-h100", 10, 0, 0)
    findings = judge("nvlink.error_rate", after, previous=before)
    assert {f.status for f in findings} == {Status.PASS}
    assert len(findings) == 8


def test_replay_below_min_events_is_not_a_verdict() -> None:
    before, after = counters_after("dgx-h100", 1, 3, 7, replay=2, recovery=1)
    findings = judge("nvlink.error_rate", after, previous=before)
    assert {f.status for f in findings} == {Status.PASS}


def test_replay_at_min_events_fails_on_the_link() -> None:
    before, after = counters_after("dgx-h100", 10, 3, 7, replay=3)
    findings = judge("nvlink.error_rate", after, previous=before)
    bad = one(by_status(findings, Status.FAIL))
    assert bad.component == "gpu3.link7"
    assert bad.message == "NVLink replay errors increasing"
    assert bad.observed["events"] == 3
    assert bad.action is Action.RESET_GPU
    assert not [f for f in findings if f.component == "gpu3"]  # no pass beside the fail


def test_min_events_is_a_parameter() -> None:
    before, after = counters_after("dgx-h100", 10, 3, 7, recovery=1)
    findings = judge("nvlink.error_rate", after, previous=before, min_events=1)
    assert one(by_status(findings, Status.FAIL)).message == "NVLink recoveries increasing"


def test_crc_fails_at_dcgm_rate_and_warns_below() -> None:
    before, after = counters_after("dgx-a100", 5, 0, 1, crc=1000)
    bad = one(by_status(judge("nvlink.error_rate", after, "dgx-a100", previous=before),
                        Status.FAIL))
    assert bad.observed["per_s"] == 200.0
    before, after = counters_after("dgx-a100", 5, 0, 1, crc=50)
    warn = one(by_status(judge("nvlink.error_rate", after, "dgx-a100", previous=before),
                         Status.WARN))
    assert warn.component == "gpu0.link1"
    assert warn.action is Action.INVESTIGATE


def test_counter_reset_counts_only_what_came_after() -> None:
    before, after = counters_after("dgx-h100", 10, 2, 2)
    assert before.nvml is not None
    assert after.nvml is not None
    before.nvml.gpus[2].nvlinks[2].errors["replay"] = 500
    after.nvml.gpus[2].nvlinks[2].errors["replay"] = 1  # GPU reset in between
    findings = judge("nvlink.error_rate", after, previous=before)
    assert not by_status(findings, Status.FAIL)
    after.nvml.gpus[2].nvlinks[2].errors["replay"] = 40  # a storm after the reset still shows
    assert one(by_status(judge("nvlink.error_rate", after, previous=before),
                         Status.FAIL)).observed["reset"] is True


def test_blackwell_failed_recovery_fails_at_once() -> None:
    before, after = counters_after("gb200-nvl72", 10, 1, 3, recovery_failed=1)
    bad = one(by_status(judge("nvlink.error_rate", after, "gb200-nvl72", previous=before),
                        Status.FAIL))
    assert (bad.component, bad.action) == ("gpu1.link3", Action.RESET_GPU)


def test_blackwell_counters_judged_by_their_own_names() -> None:
    before, after = counters_after("gb200-nvl72", 10, 0, 0, rcv_errors=2,
                                   symbol_errors=10_000)
    findings = judge("nvlink.error_rate", after, "gb200-nvl72", previous=before)
    assert {f.status for f in findings} == {Status.PASS}  # symbol errors: not judged
    before, after = counters_after("gb200-nvl72", 10, 0, 0, rcv_errors=20, recovery=5,
                                   local_link_integrity=4)
    findings = judge("nvlink.error_rate", after, "gb200-nvl72", previous=before)
    warns = by_status(findings, Status.WARN)
    assert sorted(f.message for f in warns) == ["NVLink local link integrity errors increasing",
                                                "NVLink receive errors increasing"]
    fail = one(by_status(findings, Status.FAIL))
    assert (fail.message, fail.action) == ("NVLink recoveries increasing", Action.RESET_GPU)
    # A receive-error storm (the simulator's nvlink_crc_storm on NVLink5) fails.
    before, after = counters_after("gb200-nvl72", 3, 2, 5, rcv_errors=1500)
    fail = one(by_status(judge("nvlink.error_rate", after, "gb200-nvl72", previous=before),
                         Status.FAIL))
    assert (fail.component, fail.action) == ("gpu2.link5", Action.RESET_GPU)
    before, after = counters_after("gb200-nvl72", 10, 0, 0, symbol_errors=10_000)
    findings = judge("nvlink.error_rate", after, "gb200-nvl72", previous=before,
                     symbol_errors_warn_per_s=100.0)
    assert one(by_status(findings, Status.WARN)).message == "NVLink symbol errors increasing"


def test_error_rate_out_of_order_samples_is_an_error() -> None:
    before = make_snapshot(taken_at=NOW + 5)
    assert one(judge("nvlink.error_rate", make_snapshot(), previous=before)).status \
        is Status.ERROR
