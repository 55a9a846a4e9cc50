"""fabric.state, and the skips every NVML fabric check shares (checks/fabric/state.py,
helpers.py)."""

from __future__ import annotations

import pytest

from clusterdiag.agent.model.gpu import FabricInfo
from clusterdiag.checks.core.finding import Status
from tests.checks.fabric.factory import (
    GPUS,
    ZERO,
    by_status,
    judge,
    make_gpu,
    make_snapshot,
    one,
    statuses,
)


@pytest.mark.parametrize("platform", ["dgx-h100", "dgx-h200", "gb200-nvl72"])
def test_state_completed_success_passes(platform: str) -> None:
    findings = judge("fabric.state", make_snapshot(platform), platform)
    assert statuses(findings) == {Status.PASS}
    assert len(findings) == GPUS[platform]


@pytest.mark.parametrize("platform", ["dgx-a100", "hgx-h100-pcie"])
def test_state_unsupported_skips(platform: str) -> None:
    finding = one(judge("fabric.state", make_snapshot(platform), platform))
    assert (finding.status, finding.component) == (Status.SKIP, "node")


def test_state_one_unsupported_gpu_skips_alone() -> None:
    gpus = [make_gpu(i, "dgx-h100") for i in range(8)]
    gpus[6] = make_gpu(6, "dgx-a100")
    findings = judge("fabric.state", make_snapshot("dgx-h100", gpus), "dgx-h100")
    assert one(by_status(findings, Status.SKIP)).component == "gpu6"
    assert len(by_status(findings, Status.PASS)) == 7


@pytest.mark.parametrize("check_id", ["fabric.state", "fabric.health_mask"])
def test_pcie_platform_skips_whatever_nvml_says(check_id: str) -> None:
    gpus = [make_gpu(i, "dgx-h100", state=1, health_summary=2) for i in range(8)]
    finding = one(judge(check_id, make_snapshot("hgx-h100-pcie", gpus), "hgx-h100-pcie"))
    assert finding.status is Status.SKIP
    assert finding.message == "no NVLink fabric on this platform"
    # With no expectations (generic), NVML's answer is judged.
    findings = judge(check_id, make_snapshot("hgx-h100-pcie", gpus), "generic")
    assert len(by_status(findings, Status.FAIL)) == 8


def test_state_unsupported_on_nvl72_warns_never_fails() -> None:
    gpus = [make_gpu(i, "gb200-nvl72") for i in range(4)]
    gpus[2].fabric = FabricInfo(state=0, status=0, cluster_uuid=ZERO, clique_id=0)
    findings = judge("fabric.state", make_snapshot("gb200-nvl72", gpus), "gb200-nvl72")
    warn = one(by_status(findings, Status.WARN))
    assert warn.component == "gpu2"
    assert not by_status(findings, Status.FAIL)


@pytest.mark.parametrize("state", [1, 2])
def test_state_not_done_fails(state: int) -> None:
    gpus = [make_gpu(i, "dgx-h100") for i in range(8)]
    gpus[5] = make_gpu(5, "dgx-h100", state=state)
    findings = judge("fabric.state", make_snapshot("dgx-h100", gpus), "dgx-h100")
    bad = one(by_status(findings, Status.FAIL))
    assert bad.component == "gpu5"
    assert bad.observed == {1: "not started", 2: "in progress"}[state]
    assert bad.message == "GPU fabric registration not completed"


def test_state_completed_with_error_status_fails() -> None:
    # A real bad GB200 node: Completed / Insufficient Resources / clique 0 / zero UUID.
    gpus = [make_gpu(i, "gb200-nvl72") for i in range(4)]
    gpus[0] = make_gpu(0, "gb200-nvl72", status=23, clique_id=0, cluster_uuid=ZERO)
    findings = judge("fabric.state", make_snapshot("gb200-nvl72", gpus), "gb200-nvl72")
    bad = one(by_status(findings, Status.FAIL))
    assert (bad.component, bad.observed) == ("gpu0", "INSUFFICIENT_RESOURCES")
    clique = judge("fabric.clique", make_snapshot("gb200-nvl72", gpus), "gb200-nvl72")
    assert one(by_status(clique, Status.FAIL)).component == "gpu0"


def test_state_unreadable_is_an_error() -> None:
    gpus = [make_gpu(i, "dgx-h100") for i in range(8)]
    gpus[1].fabric = None
    gpus[1].errors["fabric"] = "Unknown"
    findings = judge("fabric.state", make_snapshot("dgx-h100", gpus), "dgx-h100")
    assert one(by_status(findings, Status.ERROR)).component == "gpu1"
