"""nccl.gpudirect_rdma (checks/nccl/gpudirect.py)."""

from __future__ import annotations

import pytest

from clusterdiag.agent.model.nccl import Gpudirect, HcaPort, NcclInfo
from clusterdiag.checks.core.finding import Status
from tests.checks.nccl.factory import PROPRIETARY, judge, make_pci, statuses

OPEN = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  555.58.02  Release Build  (x)"


@pytest.mark.parametrize(("gdr", "status"), [
    (Gpudirect(peermem="/sys/module/nvidia_peermem/version"), Status.PASS),
    (Gpudirect(kernel_release="6.8.0-45-generic", driver_line=OPEN, driver_open=True),
     Status.PASS),
    (Gpudirect(kernel_release="6.8.0-45-generic", driver_line=PROPRIETARY, driver_open=False),
     Status.FAIL),
    (Gpudirect(kernel_release="5.4.0-150-generic", driver_line=OPEN, driver_open=True),
     Status.FAIL),
    (Gpudirect(kernel_release="6.8.0"), Status.FAIL),
])
def test_gpudirect_verdicts(gdr: Gpudirect, status: Status) -> None:
    (finding,) = judge("nccl.gpudirect_rdma", NcclInfo(gpudirect=gdr))
    assert finding.status is status


def test_gpudirect_skips_without_rdma_nic() -> None:
    findings = judge("nccl.gpudirect_rdma", NcclInfo(gpudirect=Gpudirect()), pci=make_pci()[:-1])
    assert statuses(findings) == [Status.SKIP]


def test_rdma_ports_alone_count_as_rdma_present() -> None:
    info = NcclInfo(ports={"mlx5_0/1": HcaPort("ACTIVE", "InfiniBand")},
                    gpudirect=Gpudirect())
    findings = judge("nccl.gpudirect_rdma", info, pci=[])
    assert statuses(findings) == [Status.FAIL]
