"""What every nvlink.* check declares, and the skips that keep NVLink checks off
PCIe and MIG GPUs."""

from __future__ import annotations

import copy

import pytest

from clusterdiag.agent.model import Snapshot, SourceStats
from clusterdiag.agent.model.gpu import Gpu, NvmlInfo
from clusterdiag.checks import REGISTRY
from clusterdiag.checks import nvlink as nvlink_checks
from clusterdiag.checks.core.finding import Status
from tests.checks.nvlink.factory import (
    BY_NVML,
    GB200_JUDGED,
    NOW,
    NVLINK_CHECKS,
    PLATFORMS,
    by_status,
    judge,
    make_gpu,
    make_snapshot,
    one,
)


def test_catalog_declares_the_contract() -> None:
    ids = sorted(i for i in REGISTRY
                 if REGISTRY[i].func.__module__.startswith(f"{nvlink_checks.__name__}."))
    assert ids == NVLINK_CHECKS
    assert REGISTRY["nvlink.error_rate"].rate
    assert REGISTRY["nvlink.error_rate"].levels == ("full",)
    assert REGISTRY["nvlink.links_up"].levels == ("quick", "full")
    assert REGISTRY["nvlink.error_rate"].params["min_events"] == 3
    assert REGISTRY["nvlink.error_rate"].params["crc_fail_per_s"] == 100
    for check_id in NVLINK_CHECKS:
        assert REGISTRY[check_id].needs == ("nvml",)
        assert REGISTRY[check_id].remedy


# --- skips that keep NVLink checks off PCIe and MIG GPUs ------------------------------

@pytest.mark.parametrize("check_id", NVLINK_CHECKS)
def test_pcie_profile_skips_every_nvlink_check(check_id: str) -> None:
    snap = make_snapshot("hgx-h100-pcie")
    finding = one(judge(check_id, snap, "hgx-h100-pcie", previous=make_snapshot(
        "hgx-h100-pcie", taken_at=NOW - 10)))
    assert finding.status is Status.SKIP
    # Counters and NVML's own rates need no profile: they skip because NVML has no links.
    reason = "NVLink not supported" if check_id in BY_NVML else "profile expects none"
    assert reason in finding.message


@pytest.mark.parametrize("check_id", NVLINK_CHECKS)
def test_nvml_not_supported_skips_per_gpu_never_fails(check_id: str) -> None:
    # PCIe cards under an NVLink profile: NVML says NotSupported; that is never a failure.
    gpus = [make_gpu(i, "hgx-h100-pcie") for i in range(8)]
    snap = make_snapshot("hgx-h100-pcie", gpus)
    finding = one(judge(check_id, snap, "dgx-h100",
                        previous=make_snapshot("hgx-h100-pcie", taken_at=NOW - 10)))
    assert (finding.status, finding.component) == (Status.SKIP, "node")
    assert finding.message == "NVLink not supported on this GPU"
    # One such GPU among NVLink GPUs: that GPU skips, the others are judged.
    platform = "gb200-nvl72" if check_id in GB200_JUDGED else "dgx-h100"
    gpus = [make_gpu(i, platform) for i in range(PLATFORMS[platform][3])]
    gpus[3] = make_gpu(3, "hgx-h100-pcie")
    findings = judge(check_id, make_snapshot(platform, gpus), platform,
                     previous=make_snapshot(platform, copy.deepcopy(gpus), taken_at=NOW - 10))
    assert one([f for f in findings if f.component == "gpu3"]).status is Status.SKIP
    assert not by_status(findings, Status.FAIL)
    assert by_status(findings, Status.PASS)


@pytest.mark.parametrize("check_id", NVLINK_CHECKS)
def test_mig_gpu_is_skipped_even_with_links_down(check_id: str) -> None:
    gpus = [make_gpu(i) for i in range(8)]
    gpus[2].mig_enabled = True
    for link in gpus[2].nvlinks:
        link.active = False
        link.version = 4
    snap = make_snapshot(gpus=gpus)
    assert snap.nvml is not None
    snap.nvml.p2p_nvlink = {k: ("not_supported" if "2" in k.split("-") else "ok")
                            for k in snap.nvml.p2p_nvlink}
    findings = judge(check_id, snap, previous=make_snapshot(taken_at=NOW - 10))
    gpu2 = [f for f in findings if f.component.startswith("gpu2")]
    assert [f.status for f in gpu2] == [Status.SKIP]
    assert "MIG" in gpu2[0].message
    assert not by_status(findings, Status.FAIL)


def test_gpu_not_answering_is_left_to_gpu_responsive() -> None:
    gpus = [make_gpu(i) for i in range(8)]
    gpus[5] = Gpu(index=5, responsive=False, lost="timeout")
    findings = judge("nvlink.links_up", make_snapshot(gpus=gpus))
    assert one([f for f in findings if f.component == "gpu5"]).status is Status.SKIP
    assert len(by_status(findings, Status.PASS)) == 7


def test_no_nvml_is_an_error_not_a_pass() -> None:
    snap = Snapshot(node="n1", taken_at=NOW,
                    sources={"nvml": SourceStats(status="timeout", error="deadline")})
    assert one(judge("nvlink.links_up", snap)).status is Status.ERROR
    snap = Snapshot(node="n1", taken_at=NOW, nvml=NvmlInfo(library_error="DriverNotLoaded"))
    finding = one(judge("nvlink.topology", snap))
    assert finding.status is Status.ERROR
    assert finding.observed == "DriverNotLoaded"
