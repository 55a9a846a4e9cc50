"""nccl.acs and nccl.iommu (checks/nccl/pcie.py)."""

from __future__ import annotations

import pytest

from clusterdiag.agent.model.nccl import Iommu, NcclInfo
from clusterdiag.checks.core.finding import Status
from clusterdiag.checks.nccl.pcie import acs
from tests.checks.nccl.factory import DG, RP, judge, make_bridge, make_pci, statuses


def test_acs_redirect_fails_on_the_device_below_it() -> None:
    pci = make_pci()
    pci[2] = make_bridge(DG, 0x1D)  # the GPU's switch port: SrcValid ReqRedir CmpltRedir UpFwd
    (finding,) = judge("nccl.acs", pci=pci)
    assert finding.status is Status.FAIL
    assert finding.component == "gpu0"
    assert finding.observed == {DG: ["ReqRedir", "CmpltRedir"]}


def test_acs_source_validation_alone_passes() -> None:
    pci = make_pci()
    pci[0] = make_bridge(RP, 0x01)
    assert statuses(judge("nccl.acs", pci=pci)) == [Status.PASS]


def test_acs_unreadable_config_skips_with_the_reason() -> None:
    why = {"acs": "extended config space not readable (needs root)"}
    (finding,) = judge("nccl.acs", pci=make_pci(acs=None, unknown=why))
    assert finding.status is Status.SKIP
    assert "needs root" in finding.message
    assert acs.__name__ == "acs"


def test_acs_is_registered_as_privileged() -> None:
    from clusterdiag.checks import REGISTRY

    assert REGISTRY["nccl.acs"].privileged


@pytest.mark.parametrize(("iommu", "status"), [
    (Iommu(), Status.PASS),
    (Iommu(units=["dmar0"], group_types={"1": "identity"},
           device_groups={"0000:1b:00.0": "1"}), Status.PASS),
    (Iommu(units=["dmar0"], group_types={"1": "DMA-FQ"},
           device_groups={"0000:1b:00.0": "1"}), Status.FAIL),
    (Iommu(units=["dmar0"]), Status.WARN),
])
def test_iommu_verdicts(iommu: Iommu, status: Status) -> None:
    (finding,) = judge("nccl.iommu", NcclInfo(iommu=iommu))
    assert finding.status is status
