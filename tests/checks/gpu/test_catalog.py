"""Properties of every gpu.* check: healthy passes, unsupported never fails,
no NVML or a lost GPU is left to gpu.responsive."""

from __future__ import annotations

import dataclasses

import pytest

from clusterdiag.agent.model.gpu import Gpu
from clusterdiag.checks import REGISTRY  # reading it loads every family
from clusterdiag.checks.core.finding import Status
from tests.checks.gpu.factory import GENERIC, GPU_IDS, NOW, bad, make_gpu, make_snap, run


def test_family_registers_every_catalog_id() -> None:
    assert sorted([
        "gpu.clock_events", "gpu.clocks", "gpu.count", "gpu.ecc_corrected_rate", "gpu.ecc_mode",
        "gpu.ecc_uncorrected", "gpu.inforom", "gpu.memory_size", "gpu.mig_mode", "gpu.model",
        "gpu.pcie_link", "gpu.pcie_replay_rate", "gpu.persistence_mode", "gpu.power_limit",
        "gpu.processes", "gpu.recovery_action", "gpu.responsive", "gpu.retired_pages",
        "gpu.row_remap", "gpu.temperature", "gpu.xid"]) == GPU_IDS
    for check_id in GPU_IDS:
        spec = REGISTRY[check_id]
        assert spec.actions, check_id
        assert spec.summary, check_id
        assert spec.summary != check_id, check_id
        assert spec.remedy, check_id
    assert {i for i in GPU_IDS if REGISTRY[i].rate} == {"gpu.ecc_corrected_rate",
                                                         "gpu.pcie_replay_rate"}
    assert REGISTRY["gpu.ecc_corrected_rate"].levels == ("full",)


@pytest.mark.parametrize("check_id", GPU_IDS)
def test_healthy_node_has_no_problem(check_id: str) -> None:
    snap = make_snap()
    findings = run(check_id, snap, previous=make_snap(taken_at=NOW - 3))
    assert not bad(findings), findings


@pytest.mark.parametrize("check_id", GPU_IDS)
def test_unsupported_everything_is_never_a_fail_or_error(check_id: str) -> None:
    """A part that supports nothing (NotSupported / FunctionNotFound / NoPermission)."""
    keys = ["name", "memory_total_bytes", "temperature_c", "slowdown_temperature_c",
            "clock_event_reasons", "performance_state", "pcie_gen_current",
            "pcie_width_current", "persistence_mode", "mig_enabled", "processes",
            "remap_histogram", "inforom_valid", "fields"]
    reasons = ["NotSupported", "FunctionNotFound", "NoPermission"]
    blank = {f.name: None for f in dataclasses.fields(Gpu)
             if f.default is None and f.name not in ("pci_bdf", "uuid")}
    gpus = [make_gpu(i, **blank, unsupported={k: reasons[(i + j) % 3]
                                              for j, k in enumerate(keys)}) for i in range(2)]
    findings = run(check_id, make_snap(gpus), GENERIC, previous=make_snap(gpus, taken_at=NOW - 3))
    assert not bad(findings), findings


@pytest.mark.parametrize("check_id", [i for i in GPU_IDS if i not in
                                      ("gpu.responsive", "gpu.count", "gpu.model", "gpu.xid")])
def test_per_gpu_checks_skip_when_nvml_is_unavailable(check_id: str) -> None:
    snap = make_snap(library_error="DriverNotLoaded", gpus=[], device_count=None)
    findings = run(check_id, snap, previous=snap)
    assert [f.status for f in findings] == [Status.SKIP]


@pytest.mark.parametrize("check_id", [i for i in GPU_IDS if i != "gpu.responsive"])
def test_a_lost_gpu_is_left_to_gpu_responsive(check_id: str) -> None:
    gpus = [make_gpu(0), Gpu(index=1, responsive=False, lost="GpuIsLost",
                             errors={"handle": "GpuIsLost"})]
    findings = run(check_id, make_snap(gpus), previous=make_snap(gpus, taken_at=NOW - 3))
    assert not [f for f in bad(findings) if f.component == "gpu1"], findings
