"""nccl.gpu_nic_affinity (checks/nccl/affinity.py)."""

from __future__ import annotations

from clusterdiag.agent.model.ib import IbDevice
from clusterdiag.agent.model.pci import PciDevice
from clusterdiag.checks.core.finding import Status
from tests.checks.nccl.factory import NIC, judge, make_pci, statuses


def _ib(role: str = "compute") -> list[IbDevice]:
    dev = IbDevice("mlx5_0", pci_bdf="0000:18:00.0")
    dev.role = role  # type: ignore[attr-defined]
    return [dev]


def test_affinity_passes_for_a_nic_under_the_gpus_switch() -> None:
    (finding,) = judge("nccl.gpu_nic_affinity", ib=_ib())
    assert finding.status is Status.PASS
    assert finding.observed == {"gpu0": "mlx5_0 PIX"}


def test_affinity_wrong_numa_warns_on_the_nic() -> None:
    (finding,) = judge("nccl.gpu_nic_affinity", pci=make_pci(nic_numa=1), ib=_ib())
    assert finding.status is Status.WARN
    assert finding.component == "mlx5_0"


def test_affinity_fails_when_the_nic_is_across_the_socket() -> None:
    pci = make_pci(nic_numa=1)
    pci[-1].path = ["0000:9a:01.0", "0000:18:00.0"]
    (finding,) = judge("nccl.gpu_nic_affinity", pci=pci, ib=_ib())
    assert finding.status is Status.FAIL
    assert finding.component == "gpu0"
    assert finding.observed == {"mlx5_0": "SYS"}


def test_affinity_sys_is_expected_on_grace_trays_and_storage_nics_do_not_count() -> None:
    pci = make_pci()
    pci[-1] = PciDevice("0000:03:00.0", 0x15B3, 0x1021, NIC, numa_node=0,
                        path=["0000:00:00.0", "0000:03:00.0"])
    ib = [IbDevice("mlx5_0", pci_bdf="0000:03:00.0")]
    ib[0].role = "compute"  # type: ignore[attr-defined]
    findings = judge("nccl.gpu_nic_affinity", pci=pci, ib=ib, profile="gb200-nvl72")
    assert statuses(findings) == [Status.PASS]
    assert statuses(judge("nccl.gpu_nic_affinity", ib=_ib("storage"))) == [Status.SKIP]
    assert statuses(judge("nccl.gpu_nic_affinity", profile="generic")) == [Status.SKIP]


def test_affinity_defers_to_ib_when_the_nics_rdma_device_is_missing() -> None:
    """The NIC is on the bus but its driver registered no RDMA device: ib.hca_count says
    so; the GPU's placement is not judged twice."""
    other = IbDevice("mlx5_9", pci_bdf="0000:9a:00.0")
    other.role = "compute"  # type: ignore[attr-defined]
    pci = [*make_pci(), PciDevice("0000:9a:00.0", 0x15B3, 0x1021, NIC, numa_node=1,
                              path=["0000:98:01.0", "0000:9a:00.0"])]
    (finding,) = judge("nccl.gpu_nic_affinity", pci=pci, ib=[other])
    assert finding.status is Status.SKIP
    assert finding.component == "gpu0"
