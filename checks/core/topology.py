"""GPU and NIC placement from a snapshot: the ``nvidia-smi topo -m`` distance classes.

Pure functions of the PCI tree (sysfs paths, NUMA nodes) and NVML's NVLink view, shared
by the topology report and the affinity check so both say the same thing. Classes, nearest
first (the nvidia-smi topo -m legend): X, NV#, PIX (at most one PCIe bridge), PXB
(several bridges, no host bridge), PHB (a host bridge), NODE (host bridges of one NUMA
node), SYS (across the inter-socket link, or between PCI segments as on Grace).
"""

from __future__ import annotations

import re

from ...agent.model.pci import MELLANOX_VENDOR, PciDevice
from ...agent.model.record import record
from ...agent.model.snapshot import Snapshot

PCI_LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")
# nvidia-smi topo -m's legend, as it prints it (the topology report and the stand-in).
LEGEND = (
    "  X    = Self",
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
    "(e.g., QPI/UPI)",
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges "
    "within a NUMA node",
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host "
    "Bridge)",
    "  PIX  = Connection traversing at most a single PCIe bridge",
    "  NV#  = Connection traversing a bonded set of # NVLinks",
)
_NETWORK_CLASS = 0x02


@record(frozen=True)
class Endpoint:
    """A GPU or NIC as the matrix shows it."""

    label: str  # GPU0, NIC3
    name: str  # gpu0, mlx5_3 (or the bdf when no ibdev is known)
    bdf: str
    pci: PciDevice | None
    role: str = "gpu"  # gpu | compute | storage | management | unknown
    role_reason: str = ""  # why the NIC has its role (checks/core/rails.py)


def _natural(name: str) -> list[object]:
    return [int(p) if p.isdecimal() else p for p in re.split(r"(\d+)", name)]


def gpus(snap: Snapshot) -> list[Endpoint]:
    """GPUs in NVML index order (PCI order when NVML did not answer), found on the bus."""
    by_bdf = {d.bdf: d for d in snap.pci or []}
    ordered: list[str] = []
    if snap.nvml is not None:
        ordered = [g.pci_bdf for g in sorted(snap.nvml.gpus, key=lambda g: g.index)
                   if g.pci_bdf]
    ordered += sorted(d.bdf for d in snap.pci or [] if d.is_nvidia_gpu and d.bdf not in ordered)
    return [Endpoint(f"GPU{i}", f"gpu{i}", bdf, by_bdf.get(bdf)) for i, bdf in enumerate(ordered)]


def nics(snap: Snapshot) -> list[Endpoint]:
    """One NIC per RDMA device (nvidia-smi's NIC legend), by ibdev name; without an
    InfiniBand view, every Mellanox network function on the bus."""
    by_bdf = {d.bdf: d for d in snap.pci or []}
    named = sorted((d for d in snap.infiniband or [] if d.pci_bdf),
                   key=lambda d: _natural(d.name))
    if not named:
        return pci_nics(snap)
    return [Endpoint(f"NIC{i}", d.name, d.pci_bdf or "", by_bdf.get(d.pci_bdf or ""),
                     d.role or "unknown", d.role_reason)
            for i, d in enumerate(named)]


def pci_nics(snap: Snapshot) -> list[Endpoint]:
    """Every Mellanox network function on the bus, RDMA device or not, by address."""
    functions = [d for d in snap.pci or []
                 if d.vendor == MELLANOX_VENDOR and d.pci_class >> 16 == _NETWORK_CLASS]
    return [Endpoint(f"NIC{i}", d.bdf, d.bdf, d, "unknown") for i, d in enumerate(functions)]


def _host_bridge(dev: PciDevice) -> str:
    first: str = dev.path[0] if dev.path else dev.bdf
    return first[:7]  # dddd:bb, the root bus: root ports on one bus share a host bridge


def _numa(dev: PciDevice) -> int | None:
    return dev.numa_node if dev.numa_node is not None and dev.numa_node >= 0 else None


def pci_distance(a: PciDevice, b: PciDevice) -> str:
    """The nvidia-smi class of the PCIe path between two devices."""
    if a.bdf[:4] != b.bdf[:4]:
        return "SYS"  # different PCI segments: no common PCIe ancestor (Grace trays)
    chain_a = a.path or [a.bdf]
    chain_b = b.path or [b.bdf]
    common = 0
    while (common < min(len(chain_a), len(chain_b)) - 1
           and chain_a[common] == chain_b[common]):
        common += 1
    if common == 0:
        if _host_bridge(a) == _host_bridge(b):
            return "PHB"
        same_numa = _numa(a) is not None and _numa(a) == _numa(b)
        return "NODE" if same_numa else "SYS"
    # Bridges below the shared ones, on the longer side, not counting the device itself.
    below = max(len(chain_a), len(chain_b)) - 1 - common
    return "PIX" if below <= 1 else "PXB"


def _active_links(snap: Snapshot, bdf: str) -> tuple[int, dict[str, int]]:
    """(active links to an NVSwitch, active links per peer GPU bdf) for one GPU."""
    if snap.nvml is None:
        return 0, {}
    gpu = next((g for g in snap.nvml.gpus if g.pci_bdf == bdf), None)
    switch = 0
    peers: dict[str, int] = {}
    for link in gpu.nvlinks if gpu else []:
        if not link.active:
            continue
        if link.remote_type == "switch":
            switch += 1
        elif link.remote_type == "gpu" and link.remote_bdf:
            peers[link.remote_bdf] = peers.get(link.remote_bdf, 0) + 1
    return switch, peers


def gpu_pair(snap: Snapshot, a: Endpoint, b: Endpoint) -> str:
    """NV# when NVLink joins the pair (directly, or both through NVSwitches), else PCIe."""
    switch_a, peers_a = _active_links(snap, a.bdf)
    switch_b, _ = _active_links(snap, b.bdf)
    if peers_a.get(b.bdf):
        return f"NV{peers_a[b.bdf]}"
    if switch_a and switch_b:
        return f"NV{min(switch_a, switch_b)}"
    return pair(a, b)


def pair(a: Endpoint, b: Endpoint) -> str:
    if a.bdf == b.bdf:
        return "X"
    if a.pci is None or b.pci is None:
        return "N/A"
    return pci_distance(a.pci, b.pci)


def rank(level: str) -> int:
    """Nearest first; NV# and unknown sort after the PCIe classes they are not."""
    return PCI_LEVELS.index(level) if level in PCI_LEVELS else len(PCI_LEVELS)
