"""Snapshots built directly from the model dataclasses for the gpu.* checks, and
``run``, which runs one check and asserts the actions it declares."""

from __future__ import annotations

import dataclasses
from typing import Any

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.gpu import Gpu, NvmlInfo
from clusterdiag.agent.model.kernel import KernelEvent, KernelLog, XidEvent
from clusterdiag.agent.model.pci import PciDevice
from clusterdiag.checks import REGISTRY  # reading it loads every family
from clusterdiag.checks.core.finding import Finding, Status
from clusterdiag.checks.profiles.profile import Profile
from tests.checks.harness import run_check

NOW = 1_800_000_000.0
H100 = "NVIDIA H100 80GB HBM3"
H100_BYTES = 85_520_809_984  # 81559 MiB, real nvidia-smi -q
GENERIC = Profile(name="generic")
GPU_IDS = sorted(k for k in REGISTRY if k.startswith("gpu."))


def bdf(index: int) -> str:
    return f"0000:{0x18 + 0x10 * index:02x}:00.0"


def port(index: int) -> str:
    return f"0000:{0x17 + 0x10 * index:02x}:00.0"


def make_gpu(index: int = 0, **changes: Any) -> Gpu:
    """A healthy H100 as NVML reports it (NVML's bus id format, upper-case domain)."""
    gpu = Gpu(
        index=index, pci_bdf=f"00000000:{0x18 + 0x10 * index:02X}:00.0", name=H100,
        uuid=f"GPU-{index:08d}", inforom_image="G520.0200.00.05", inforom_valid=True,
        architecture=9, memory_total_bytes=H100_BYTES, ecc_enabled=True, ecc_pending=True,
        ecc_volatile_corrected=0, ecc_volatile_uncorrected=0, ecc_aggregate_corrected=0,
        ecc_aggregate_uncorrected=0, remapped_corrected=0, remapped_uncorrected=0,
        remap_pending=False, remap_failure=False,
        remap_histogram={"max": 2560, "high": 0, "partial": 0, "low": 0, "none": 0},
        sram_threshold_exceeded=False, unrepairable_memory=False, recovery_action=0,
        temperature_c=41, memory_temperature_c=48, slowdown_temperature_c=89,
        clock_event_reasons=0x1, sm_clock_mhz=345, sm_clock_max_mhz=1980,
        clock_event_time_ns={"sw_thermal": 0, "hw_thermal": 0, "hw_power_brake": 0},
        power_draw_w=70.0, power_limit_w=700.0,
        power_default_limit_w=700.0, performance_state=0, pcie_gen_current=5,
        pcie_width_current=16, pcie_replay_count=9, persistence_mode=True, mig_enabled=False,
        mig_pending=False, processes=[],
        unsupported={"retired_pages_sbe": "NotSupported", "retired_pages_dbe": "NotSupported",
                     "retired_pending": "NotSupported"},
    )
    return dataclasses.replace(gpu, **changes)


def pci_gpu(index: int, **changes: Any) -> PciDevice:
    dev = PciDevice(bdf=bdf(index), vendor=0x10DE, device=0x2330, pci_class=0x030200,
                    driver="nvidia", path=[port(index), bdf(index)],
                    current_link_speed_gts=32.0, current_link_width=16,
                    max_link_speed_gts=32.0, max_link_width=16)
    return dataclasses.replace(dev, **changes)


def bridge(index: int, **changes: Any) -> PciDevice:
    dev = PciDevice(bdf=port(index), vendor=0x10B5, device=0xC030, pci_class=0x060400,
                    driver="pcieport", path=[port(index)], current_link_speed_gts=32.0,
                    current_link_width=16, max_link_speed_gts=32.0, max_link_width=16)
    return dataclasses.replace(dev, **changes)


def make_snap(gpus: list[Gpu] | None = None, *, n: int = 8, pci: list[PciDevice] | None = None,
              kernel_log: KernelLog | None = None, taken_at: float = NOW,
              **nvml: Any) -> Snapshot:
    gpus = [make_gpu(i) for i in range(n)] if gpus is None else gpus
    if pci is None:
        pci = [d for g in gpus for d in (bridge(g.index), pci_gpu(g.index))]
    info = NvmlInfo(driver_version="570.124.06", device_count=len(gpus), gpus=gpus)
    info = dataclasses.replace(info, **nvml)
    return Snapshot(node="n1", taken_at=taken_at, pci=pci, nvml=info,
                    kernel_log=kernel_log if kernel_log is not None else KernelLog("test"))


def run(check_id: str, snap: Snapshot, profile: Profile | str = "dgx-h100", *,
        previous: Snapshot | None = None, mode: str = "run", now: float = NOW,
        **params: Any) -> list[Finding]:
    """``run_check`` on a dgx-h100 at NOW, parameters as keywords."""
    return run_check(check_id, snap, profile=profile, params=params, mode=mode, now=now,
                     previous=previous)


def only(findings: list[Finding], status: Status) -> list[Finding]:
    return [f for f in findings if f.status is status]


def bad(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.status not in (Status.PASS, Status.SKIP)]


def xid_line(code: int, index: int = 0, *, age: float | None = 60.0, pid: int | None = 4242,
             message: str = "Unspecified error.", pci: str | None = None) -> XidEvent:
    where = pci if pci is not None else f"0000:{0x18 + 0x10 * index:02x}:00.0"
    return XidEvent(xid=code, pci_bdf=where, pid=pid, process="python3" if pid else None,
                    message=message, raw=f"NVRM: Xid (PCI:{where}): {code}, {message}",
                    time=None if age is None else NOW - age)


def klog(*xids: XidEvent, events: list[KernelEvent] | None = None,
         boot_time: float | None = NOW - 86_400) -> KernelLog:
    return KernelLog(source="test", xids=list(xids), events=events or [],
                     lines_read=len(xids) + len(events or []) + 10, boot_time=boot_time)



def xid_run(*xids: XidEvent, gpus: list[Gpu] | None = None, **kw: Any) -> list[Finding]:
    events = kw.pop("events", None)
    boot = kw.pop("boot_time", NOW - 86_400)
    snap = make_snap(gpus if gpus is not None else [make_gpu(0), make_gpu(1)],
                     kernel_log=klog(*xids, events=events, boot_time=boot),
                     **kw.pop("nvml", {}))
    return run("gpu.xid", snap, **kw)
