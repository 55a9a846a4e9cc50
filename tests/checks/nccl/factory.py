"""One GPU and its NIC under one PCIe switch, RDMA ports as NCCL sees them, and ``judge``,
which runs one nccl.* check on them through ``run_check``."""

from __future__ import annotations

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.ib import IbDevice
from clusterdiag.agent.model.nccl import HcaPort, NcclInfo
from clusterdiag.agent.model.pci import PciDevice
from clusterdiag.checks.core.finding import Finding, Status
from tests.checks.harness import run_check

GPU, NIC = 0x030200, 0x020700
RP, UP, DG, DN = "0000:14:01.0", "0000:15:00.0", "0000:1a:00.0", "0000:17:00.0"


def make_bridge(bdf: str, acs: int | None = 0, unknown: dict | None = None) -> PciDevice:
    return PciDevice(bdf, 0x10B5, 0xC030, 0x060400, acs_ctrl=acs, unknown=unknown or {})


def make_pci(gpu_numa: int = 0, nic_numa: int = 0, acs: int | None = 0,
         unknown: dict | None = None) -> list[PciDevice]:
    """One GPU and its NIC under one PCIe switch (PIX), like a DGX H100 slot."""
    return [make_bridge(b, acs, unknown) for b in (RP, UP, DG, DN)] + [
        PciDevice("0000:1b:00.0", 0x10DE, 0x2330, GPU, numa_node=gpu_numa,
                  path=[RP, UP, DG, "0000:1b:00.0"]),
        PciDevice("0000:18:00.0", 0x15B3, 0x1021, NIC, numa_node=nic_numa,
                  path=[RP, UP, DN, "0000:18:00.0"]),
    ]


def judge(check_id: str, info: NcclInfo | None = None, pci: list[PciDevice] | None = None,
          ib: list[IbDevice] | None = None, mode: str = "run", profile: str = "dgx-h100",
          **params: object) -> list[Finding]:
    """``run_check`` on a node of one GPU and its NIC (``make_pci``) unless ``pci`` says
    otherwise, parameters as keywords."""
    snap = Snapshot(node="n", taken_at=0.0, nccl=info or NcclInfo(),
                    pci=make_pci() if pci is None else pci, infiniband=ib)
    return run_check(check_id, snap, profile=profile, params=params, mode=mode)


def statuses(findings: object) -> list[Status]:
    return [f.status for f in findings]  # type: ignore[attr-defined]
PROPRIETARY = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05  Tue Oct  8 2024"

PORTS = {f"mlx5_{i}/1": HcaPort("ACTIVE", "InfiniBand") for i in (0, 1, 2, 3, 4, 5, 10, 11)}
PORTS["mlx5_6/1"] = HcaPort("DOWN", "InfiniBand")
