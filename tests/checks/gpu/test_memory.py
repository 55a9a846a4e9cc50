"""ECC, retired pages, row remapping and memory size (checks/gpu/memory.py)."""

from __future__ import annotations

from typing import Any

import pytest

from clusterdiag.agent.model import Snapshot
from clusterdiag.checks.core.finding import Action, Status
from tests.checks.gpu.factory import GENERIC, NOW, bad, make_gpu, make_snap, only, run


def test_ecc_mode() -> None:
    gpus = [make_gpu(0), make_gpu(1, ecc_enabled=False, ecc_pending=False),
            make_gpu(2, ecc_enabled=False, ecc_pending=True),
            make_gpu(3, ecc_enabled=True, ecc_pending=False),
            make_gpu(4, ecc_enabled=None, ecc_pending=None,
                     unsupported={"ecc_enabled": "NotSupported"})]
    findings = run("gpu.ecc_mode", make_snap(gpus))
    assert [(f.status, f.action) for f in findings] == [
        (Status.PASS, Action.NONE), (Status.FAIL, Action.FIX_CONFIG),
        (Status.FAIL, Action.REBOOT), (Status.WARN, Action.FIX_CONFIG),
        (Status.SKIP, Action.NONE)]


def test_ecc_uncorrected_judges_volatile_never_aggregate() -> None:
    gpus = [make_gpu(0, ecc_aggregate_uncorrected=7),
            make_gpu(1, ecc_volatile_uncorrected=2, ecc_aggregate_uncorrected=9)]
    findings = run("gpu.ecc_uncorrected", make_snap(gpus))
    assert [(f.status, f.action) for f in findings] == [
        (Status.PASS, Action.NONE), (Status.FAIL, Action.RESET_GPU)]
    assert findings[1].observed == 2
    assert only(run("gpu.ecc_uncorrected", make_snap(gpus), max_volatile=5), Status.FAIL) == []


def test_ecc_uncorrected_unsupported_skips_and_read_error_skips() -> None:
    gpus = [make_gpu(0, ecc_volatile_uncorrected=None,
                     unsupported={"ecc_volatile_uncorrected": "NotSupported"}),
            make_gpu(1, ecc_volatile_uncorrected=None, errors={"fields": "Unknown"})]
    findings = run("gpu.ecc_uncorrected", make_snap(gpus))
    assert [f.status for f in findings] == [Status.SKIP, Status.SKIP]
    assert "not supported" in findings[0].message
    assert "gpu.responsive" in findings[1].message


def _corrected(value: int, taken_at: float) -> Snapshot:
    return make_snap([make_gpu(0, ecc_volatile_corrected=value),
                      make_gpu(1, ecc_volatile_corrected=0)], taken_at=taken_at)


def test_ecc_corrected_rate_needs_a_previous_sample() -> None:
    (finding,) = run("gpu.ecc_corrected_rate", _corrected(500, NOW))
    assert finding.status is Status.SKIP


def test_ecc_corrected_rate_below_min_events_passes() -> None:
    # 2 errors in 1 s is 120/min, but 2 events are too few to judge.
    findings = run("gpu.ecc_corrected_rate", _corrected(2, NOW),
                   previous=_corrected(0, NOW - 1))
    assert [f.status for f in findings] == [Status.PASS, Status.PASS]
    assert findings[0].observed["events"] == 2


def test_ecc_corrected_rate_storm_warns() -> None:
    findings = run("gpu.ecc_corrected_rate", _corrected(600, NOW),
                   previous=_corrected(0, NOW - 3))
    assert [(f.status, f.component) for f in findings] == [
        (Status.WARN, "gpu0"), (Status.PASS, "gpu1")]
    assert findings[0].action is Action.INVESTIGATE
    assert findings[0].observed["per_min"] == pytest.approx(12000.0)


def test_ecc_corrected_rate_slow_growth_over_a_long_interval_passes() -> None:
    # 5 errors in 10 minutes: judged (>= 3 events), 0.5/min is under 6/min.
    findings = run("gpu.ecc_corrected_rate", _corrected(105, NOW),
                   previous=_corrected(100, NOW - 600))
    assert findings[0].status is Status.PASS


def test_ecc_corrected_rate_after_a_reset_uses_the_count_since() -> None:
    findings = run("gpu.ecc_corrected_rate", _corrected(40, NOW),
                   previous=_corrected(90_000, NOW - 4))
    assert findings[0].status is Status.WARN
    assert findings[0].observed["reset"] is True
    assert findings[0].observed["events"] == 40


def test_ecc_corrected_rate_matches_gpus_by_uuid_not_index() -> None:
    old = make_snap([make_gpu(0, uuid="GPU-b", ecc_volatile_corrected=0),
                     make_gpu(1, uuid="GPU-a", ecc_volatile_corrected=1000)],
                    taken_at=NOW - 3)
    new = make_snap([make_gpu(0, uuid="GPU-a", ecc_volatile_corrected=1000),
                     make_gpu(1, uuid="GPU-b", ecc_volatile_corrected=0)])
    assert not bad(run("gpu.ecc_corrected_rate", new, previous=old))


def test_retired_pages() -> None:
    base = {"unsupported": {}, "retired_pages_sbe": 0, "retired_pages_dbe": 0,
            "retired_pending": False, "architecture": 7}
    gpus = [make_gpu(0, **base), make_gpu(1, **{**base, "retired_pages_sbe": 60,
                                                 "retired_pages_dbe": 3}),
            make_gpu(2, **{**base, "retired_pending": True, "retired_pages_dbe": 1}),
            make_gpu(3)]  # Hopper: not supported
    findings = run("gpu.retired_pages", make_snap(gpus))
    assert [(f.component, f.status, f.action) for f in findings] == [
        ("gpu0", Status.PASS, Action.NONE), ("gpu1", Status.FAIL, Action.RMA),
        ("gpu2", Status.FAIL, Action.RESET_GPU), ("gpu3", Status.SKIP, Action.NONE)]


@pytest.mark.parametrize(("changes", "message", "action"), [
    ({"remap_pending": True}, "row remap pending: reset the GPU", Action.RESET_GPU),
    ({"remap_failure": True}, "row remapping failed", Action.RMA),
    ({"remapped_uncorrected": 512}, "uncorrectable row remaps at the RMA limit", Action.RMA),
    ({"remap_histogram": {"max": 2559, "high": 0, "partial": 0, "low": 0, "none": 1}},
     "memory banks without spare rows", Action.RMA),
    ({"unrepairable_memory": True}, "GPU reports unrepairable memory", Action.RMA),
    ({"sram_threshold_exceeded": True}, "SRAM uncorrectable error threshold exceeded",
     Action.RMA),
])
def test_row_remap_failures(changes: dict[str, Any], message: str, action: Action) -> None:
    findings = run("gpu.row_remap", make_snap([make_gpu(0, **changes)]))
    assert [(f.status, f.message, f.action) for f in findings] == [
        (Status.FAIL, message, action)]


def test_row_remap_under_the_limit_passes() -> None:
    findings = run("gpu.row_remap", make_snap([make_gpu(0, remapped_uncorrected=511,
                                                        remapped_corrected=20)]))
    assert [f.status for f in findings] == [Status.PASS]


def test_row_remap_skips_under_mig_and_when_unsupported() -> None:
    hidden = {"remap_pending": None, "remap_failure": None, "remapped_uncorrected": None,
              "remapped_corrected": None, "remap_histogram": None}
    mig = make_gpu(0, mig_enabled=True, **hidden,
                   unsupported={"remap_pending": "NotSupported",
                                "remap_histogram": "NotSupported"})
    old = make_gpu(1, architecture=6, **hidden, unsupported={"remap_pending": "NotSupported"})
    findings = run("gpu.row_remap", make_snap([mig, old]))
    assert [f.status for f in findings] == [Status.SKIP, Status.SKIP]
    assert "MIG" in findings[0].message
    assert "not supported" in findings[1].message



def test_memory_size() -> None:
    gpus = [make_gpu(0), make_gpu(1, memory_total_bytes=60 << 30),
            make_gpu(2, memory_total_bytes=141 << 30)]
    findings = run("gpu.memory_size", make_snap(gpus))
    assert [(f.status, f.action) for f in findings] == [
        (Status.PASS, Action.NONE), (Status.FAIL, Action.RMA), (Status.WARN, Action.FIX_CONFIG)]
    assert findings[0].observed == pytest.approx(79.6)


def test_memory_size_takes_the_variant_from_the_model_name() -> None:
    gpu = make_gpu(0, name="NVIDIA A100-SXM4-40GB", memory_total_bytes=40 << 30)
    assert not bad(run("gpu.memory_size", make_snap([gpu]), "dgx-a100"))


def test_memory_size_unknown_model_investigates_and_no_expectation_skips() -> None:
    gpu = make_gpu(0, name="NVIDIA H100 PCIe", memory_total_bytes=60 << 30)
    (finding,) = run("gpu.memory_size", make_snap([gpu]))
    assert (finding.status, finding.action) == (Status.FAIL, Action.INVESTIGATE)
    assert [f.status for f in run("gpu.memory_size", make_snap([gpu]), GENERIC)] == [
        Status.SKIP]
