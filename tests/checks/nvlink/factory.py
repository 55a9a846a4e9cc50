"""Hand-built snapshots of real platforms for the nvlink.* and nvswitch.* checks,
and ``judge``, which runs one check and asserts the actions it declares."""

from __future__ import annotations

from typing import Any

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.gpu import Gpu, NvLink, NvmlInfo
from clusterdiag.agent.model.pci import NVIDIA_VENDOR, PciDevice
from clusterdiag.checks.core.finding import Finding, Status
from tests.checks.harness import run_check

NOW = 1_700_000_000.0
NVLINK_CHECKS = ["nvlink.ber", "nvlink.error_rate", "nvlink.fec_history", "nvlink.links_up",
                 "nvlink.remote", "nvlink.speed", "nvlink.topology",
                 "nvlink.version"]
# Judged only where the platform has NVLink5 fields or a per-link speed: the contract
# tests judge them on GB200.
GB200_JUDGED = frozenset({"nvlink.ber", "nvlink.fec_history", "nvlink.speed"})
# Judged by what NVML answers whatever the profile: off NVLink they skip as unsupported.
BY_NVML = frozenset({"nvlink.ber", "nvlink.error_rate", "nvlink.fec_history"})
LEGACY = {"replay": 0, "recovery": 0, "crc": 0}
NVLINK5 = {"recovery_failed": 0, "recovery": 0, "rcv_errors": 0, "local_link_integrity": 0,
           "symbol_errors": 0}
# Per platform: links per GPU, NVML version enum, counters, GPUs.
PLATFORMS = {"dgx-h100": (18, 6, LEGACY, 8), "dgx-a100": (12, 4, LEGACY, 8),
             "gb200-nvl72": (18, 7, NVLINK5, 4), "hgx-h100-pcie": (0, None, {}, 8),
             "h100-nvl": (12, 6, LEGACY, 8)}



def make_gpu(index: int, platform: str = "dgx-h100", **changes: Any) -> Gpu:
    links, version, counters, _ = PLATFORMS[platform]
    gpu = Gpu(index=index, pci_bdf=f"0000:{0x18 + 16 * index:02x}:00.0",
              uuid=f"GPU-{platform}-{index}", mig_enabled=False)
    if links:
        gpu.nvlink_count = links
        gpu.nvswitch_link_count = links
        gpu.nvlinks = [NvLink(link=n, active=True, version=version,
                              speed_mbps=53125 if version == 7 else 26562,
                              errors=dict(counters)) for n in range(links)]
        if counters is NVLINK5:
            for link in gpu.nvlinks:
                link.state, link.low_power = 1, False
                link.effective_ber = link.symbol_ber = 1.5e-254  # NVML's "no errors"
                link.fec_history = [0] * 16
    else:
        gpu.unsupported["nvlinks"] = "NotSupported"
        gpu.unsupported["nvlink_count"] = "NotSupported"
    for key, value in changes.items():
        setattr(gpu, key, value)
    return gpu


def make_snapshot(platform: str = "dgx-h100", gpus: list[Gpu] | None = None,
                  taken_at: float = NOW, **fields: Any) -> Snapshot:
    count = PLATFORMS[platform][3]
    gpus = gpus if gpus is not None else [make_gpu(i, platform) for i in range(count)]
    p2p = {f"{a.index}-{b.index}": "ok" if PLATFORMS[platform][0] else "not_supported"
           for i, a in enumerate(gpus) for b in gpus[i + 1:]}
    nvml = NvmlInfo(driver_version="570.86.15", device_count=len(gpus), gpus=gpus,
                    p2p_nvlink=p2p)
    return Snapshot(node="n1", taken_at=taken_at, nvml=nvml, **fields)


def judge(check_id: str, snapshot: Snapshot, platform: str = "dgx-h100", *,
          previous: Snapshot | None = None, **params: Any) -> list[Finding]:
    """``run_check`` at --level full, parameters as keywords."""
    return run_check(check_id, snapshot, profile=platform, params=params, level="full",
                     previous=previous)


def by_status(findings: list[Finding], status: Status) -> list[Finding]:
    return [f for f in findings if f.status is status]


def one(findings: list[Finding]) -> Finding:
    assert len(findings) == 1, findings
    return findings[0]


def nvswitch(bdf: str) -> PciDevice:
    return PciDevice(bdf=bdf, vendor=NVIDIA_VENDOR, device=0x22A3, pci_class=0x068000,
                     driver="nvidia-nvswitch")
