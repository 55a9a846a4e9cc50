"""A site profile from a healthy node as it is (``clusterdiag profiles capture``): what
``nhc-genconf`` is to NHC.

The profile extends a base (``--extends``, else the detected profile) and overrides what
was read on the node: the GPUs (model, count, memory), their NVLinks (count and
version), the NVSwitches, the compute NICs (count, rate, link layer, PCIe link, how they
were recognised: their ibdev names) and each GPU's distance to its nearest compute NIC.
Every value carries a comment saying what it was read from. What could not be read (no
NVML, no RDMA devices) is left to the base, and a comment says so: the capture still
succeeds. No per-node identifier (GUID, serial, UUID, PCI address) is written: one
profile serves every node of the model. The versions seen (NVIDIA driver, GPU VBIOS,
compute NIC firmware) become expectations that warn when a node runs another
(host.versions), never fail.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from ...checks.core.rails import assign, decide, has_recognition_keys
from ...checks.core.topology import gpus, nics, pair, rank
from ...checks.profiles.profile import Profile
from ..model import Snapshot
from ..model.ib import IbPort, nvswitch_management
from ..model.pci import GEN_GTS

GIB = 1 << 30


@dataclass
class Capture:
    """The profile's values in order, each with the comment that says where it came from."""

    extends: str
    values: dict[str, Any] = field(default_factory=dict)
    comments: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what was inherited, and why

    def set(self, key: str, value: Any, source: str) -> None:
        self.values[key], self.comments[key] = value, source

    def to_yaml(self, node: str) -> str:
        lines = [f"# Captured by clusterdiag profiles capture from {node}.",
                 *(f"# {note}" for note in self.notes), f"extends: {self.extends}"]
        for key, value in self.values.items():
            lines.append(f"{key}: {json.dumps(value)}  # {self.comments[key]}")
        return "\n".join(lines) + "\n"


def _gpus(snap: Snapshot, cap: Capture) -> None:
    nv = snap.nvml
    if nv is None or not nv.gpus:
        why = (nv.library_error if nv is not None and nv.library_error else "no GPU in NVML")
        cap.notes.append(f"GPU values inherited from {cap.extends}: NVML unreadable ({why})")
        return
    names = sorted({g.name for g in nv.gpus if g.name})
    cap.set("gpu_models", names, "nvmlDeviceGetName")
    cap.set("gpu_count", len(nv.gpus), "GPUs NVML enumerates")
    sizes = [g.memory_total_bytes for g in nv.gpus if g.memory_total_bytes]
    if sizes:
        cap.set("gpu_memory_gib", round(min(sizes) / GIB), "nvmlDeviceGetMemoryInfo total")
    active = [sum(1 for link in g.nvlinks if link.active) for g in nv.gpus]
    if any(active):
        cap.set("nvlinks_per_gpu", min(active), "active links, nvmlDeviceGetNvLinkState")
        versions = sorted({link.version for g in nv.gpus for link in g.nvlinks
                           if link.active and link.version is not None})
        if len(versions) == 1:
            cap.set("nvlink_version", versions[0], "nvmlDeviceGetNvLinkVersion")
    if nv.driver_version:
        cap.set("driver_versions", [nv.driver_version],
                "nvmlSystemGetDriverVersion; another warns (host.versions)")
    vbios = sorted({g.vbios for g in nv.gpus if g.vbios})
    if vbios:
        cap.set("vbios_versions", vbios,
                "nvmlDeviceGetVbiosVersion; another warns (host.versions)")


def _nvswitches(snap: Snapshot, cap: Capture) -> None:
    if snap.pci is None:
        cap.notes.append(f"NVSwitch values inherited from {cap.extends}: PCI not read")
        return
    count = sum(1 for d in snap.pci if d.is_nvswitch)
    managers = sum(1 for d in snap.infiniband or [] if nvswitch_management(d))
    if count:
        cap.set("nvswitch", True, "NVSwitch functions on PCI (class 0x0680, vendor 10de)")
        cap.set("nvswitch_count", count, "NVSwitch functions on PCI")
    elif managers:
        cap.set("nvswitch", True, "NVSwitch management functions (VPD SMDL=SW_MNG)")
        cap.set("nvswitch_mgmt_functions", managers,
                "RDMA functions whose VPD says SMDL=SW_MNG")


def _nics(snap: Snapshot, base: Profile, cap: Capture) -> None:
    if not snap.infiniband:
        cap.notes.append(f"NIC values inherited from {cap.extends}: no RDMA device read")
        return
    judged_by = _assign_rails(snap, base)
    compute = sorted((d for d in snap.infiniband if d.role == "compute"), key=lambda d: d.name)
    if not compute:
        cap.notes.append(f"NIC values inherited from {cap.extends}: no compute NIC found")
        return
    ports = [p for d in compute for p in d.ports]
    layers = sorted({p.link_layer for p in ports if p.link_layer})
    rates = [p.rate_gbps for p in ports if p.rate_gbps]
    cap.set("compute_hcas", len(compute), f"RDMA devices judged compute {judged_by}")
    if len(layers) == 1:
        cap.set("hca_link_layer", layers[0], "ports/N/link_layer")
    if rates:
        cap.set("hca_rate_gbps", min(rates), "ports/N/rate")
    speeds = [d.pcie_speed_gts for d in compute if d.pcie_speed_gts]
    widths = [d.pcie_width for d in compute if d.pcie_width]
    gen = next((g for g, s in sorted(GEN_GTS.items(), reverse=True)
                if speeds and min(speeds) >= s), None)
    if gen is not None:
        cap.set("nic_pcie_gen", gen, "device/current_link_speed")
    if widths:
        cap.set("nic_pcie_width", min(widths), "device/current_link_width")
    if layers == ["Ethernet"]:
        _roce(ports, cap)
    _recognition(snap, base, cap, [d.name for d in compute])
    firmware = sorted({d.fw_ver for d in compute if d.fw_ver})
    if firmware:
        cap.set("nic_firmware", firmware,
                "the compute NICs' fw_ver; another warns (host.versions)")
    _distances(snap, cap)


def _compute_count(snap: Snapshot) -> int:
    return sum(1 for d in snap.infiniband or [] if d.role == "compute")


def _assign_rails(snap: Snapshot, base: Profile) -> str:
    """Judge the NICs' roles for the capture, and say how.

    Under the base's rules first. A base that names a compute fabric (dgx-h100: InfiniBand)
    turns every rail of a node on the other one (a RoCE site's H100s) into storage, and a
    capture that kept that would fail the very node it was read from. So where the rails
    the board's layout shows (checks/core/rails.py rule 5: the link layer the NICs beside
    the GPUs run) outnumber the base's, those are captured, with their link layer: the
    node as it is.
    """
    assign(snap, base)
    if base.hca_link_layer is None or has_recognition_keys(base):
        return f"under {base.name}"
    by_base = _compute_count(snap)
    assign(snap, replace(base, hca_link_layer=None))
    if _compute_count(snap) > by_base:
        return (f"by PCIe affinity to the GPUs: {base.name}'s {base.hca_link_layer} fabric "
                "is not the rails' link layer here")
    assign(snap, base)
    return f"under {base.name}"


def _roce(ports: list[IbPort], cap: Capture) -> None:
    """A RoCE fabric's settings as every compute port has them (one PFC priority, one
    trust mode); a setting the ports disagree on or that was not read is not captured."""
    mtus = [p.netdev_mtu for p in ports if p.netdev_mtu]
    if mtus:
        cap.set("roce_mtu", min(mtus), "/sys/class/net/IF/mtu")
    pfc = {tuple(p.qos.pfc) for p in ports if p.qos is not None and p.qos.pfc is not None}
    if len(pfc) == 1 and len(next(iter(pfc))) == 1:
        cap.set("roce_priority", next(iter(pfc))[0], "the one priority with PFC on (dcb or "
                                                     "mlnx_qos)")
    trust = {p.qos.trust for p in ports if p.qos is not None and p.qos.trust}
    if len(trust) == 1:
        cap.set("roce_trust", trust.pop(), "the ports' trust mode (dcb app, or mlnx_qos)")


def _recognition(snap: Snapshot, base: Profile, cap: Capture, compute: list[str]) -> None:
    """Recognition keys only where the captured profile's own rules would pick other
    NICs: then the compute netdevs' names (systemd names them by PCI slot, the same on
    every node of one model), never GUIDs."""
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v
                              for k, v in cap.values.items()}
    judged = decide(snap.infiniband or [], replace(base, **values))
    if sorted(n for n, r in judged.items() if r.role == "compute") == compute:
        return
    netdevs = sorted({p.netdev for d in snap.infiniband or [] if d.name in compute
                      for p in d.ports if p.netdev})
    cap.set("compute_netdevs", netdevs, "the compute NICs' netdevs: the profile's link "
                                        "layer and count alone would pick others")


def _distances(snap: Snapshot, cap: Capture) -> None:
    rails = [n for n in nics(snap) if n.role == "compute"]
    seen = set()
    for gpu in gpus(snap):
        levels = [pair(gpu, nic) for nic in rails]
        if levels:
            seen.add(min(levels, key=rank))
    if seen:
        cap.set("gpu_nic_distance", sorted(seen, key=rank),
                "each GPU's nearest compute NIC on the PCIe tree (nvidia-smi topo levels)")


def capture(snap: Snapshot, base: Profile) -> Capture:
    cap = Capture(extends=base.name)
    _gpus(snap, cap)
    _nvswitches(snap, cap)
    _nics(snap, base, cap)
    return cap
