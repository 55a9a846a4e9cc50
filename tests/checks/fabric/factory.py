"""Snapshots built from the model for the fabric.* checks, per platform, and ``judge``,
which runs one check."""

from __future__ import annotations

from typing import Any

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.gpu import FabricInfo, Gpu, NvmlInfo
from clusterdiag.agent.model.host import HostInfo, ServiceState
from clusterdiag.checks.core.finding import Finding, Status
from tests.checks.harness import run_check

NOW = 1_700_000_000.0
ZERO = "00000000-0000-0000-0000-000000000000"
RACK = "9c6f5af3-2b1e-4c1d-9f55-0a1b2c3d4e5f"
# A healthy NVL72 GPU's mask as the simulator builds it: partition assigned, degraded BW,
# route recovery, route unhealthy and access-timeout recovery all FALSE, config NONE.
HEALTHY_MASK = 0x1 << 12 | 0x2 | 0x2 << 2 | 0x2 << 4 | 0x2 << 6 | 1 << 8
GPUS = {"generic": 8, "dgx-h100": 8, "dgx-h200": 8, "dgx-a100": 8, "gb200-nvl72": 4,
        "hgx-h100-pcie": 8}


def fabric_for(platform: str) -> FabricInfo | None:
    """What NVML reports per GPU on each platform (gpud PRs #1106/#1108, gpu-operator#2511)."""
    if platform in ("dgx-a100", "hgx-h100-pcie"):
        return None  # Hopper+ only; NotSupported on PCIe cards
    if platform == "gb200-nvl72":
        return FabricInfo(state=3, status=0, cluster_uuid=RACK, clique_id=4026,
                          health_mask=HEALTHY_MASK, health_summary=1)
    # HGX H100/H200: completed once Fabric Manager is done, zeros for domain and clique.
    return FabricInfo(state=3, status=0, cluster_uuid=ZERO, clique_id=0, health_mask=0,
                      health_summary=None)


def make_gpu(index: int, platform: str, **fabric_changes: Any) -> Gpu:
    gpu = Gpu(index=index, pci_bdf=f"0000:{0x18 + 16 * index:02x}:00.0")
    fabric = fabric_for(platform)
    if fabric is None:
        gpu.unsupported["fabric"] = "NotSupported"
    else:
        for key, value in fabric_changes.items():
            setattr(fabric, key, value)
        gpu.fabric = fabric
    return gpu


def make_snapshot(platform: str, gpus: list[Gpu] | None = None,
                  services: dict[str, str] | None = None, has_systemd: bool = True,
                  host: bool = True) -> Snapshot:
    gpus = gpus if gpus is not None else [make_gpu(i, platform) for i in range(GPUS[platform])]
    info = None
    if host:
        info = HostInfo("n1", has_systemd=has_systemd, services=[
            ServiceState(name, active=state, sub="running" if state == "active" else "dead",
                         load="not-found" if state == "not-found" else "loaded")
            for name, state in (services or {}).items()])
    return Snapshot(node="n1", taken_at=NOW, host=info,
                    nvml=NvmlInfo(device_count=len(gpus), gpus=gpus))


def judge(check_id: str, snapshot: Snapshot, platform: str, *, mode: str = "run",
          **params: Any) -> list[Finding]:
    """``run_check`` at NOW, parameters as keywords."""
    return run_check(check_id, snapshot, profile=platform, params=params, mode=mode, now=NOW)


def by_status(findings: list[Finding], status: Status) -> list[Finding]:
    return [f for f in findings if f.status is status]


def one(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, findings
    return findings[0]


def statuses(findings: list[Finding]) -> set[Status]:
    return {f.status for f in findings}
