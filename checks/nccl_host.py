"""The host side of NCCL readiness: GPUDirect RDMA, PCIe ACS, the IOMMU, job limits, and
where each GPU's compute NIC sits (NCCL's net_ib/gdr.cc and graph/paths.cc)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..agent.model import Snapshot
from ..agent.model.pci import PciDevice
from .finding import Action, Finding, Status
from .nccl import nccl_info, rdma_present
from .registry import CheckContext, check
from .topology import Endpoint, gpus, nics, pair, pci_nics, rank

NODE = "node"
MIB = 1 << 20
# ACS Control bits that send peer-to-peer TLPs up to the root complex (pci_regs.h,
# pciutils ls-ecaps.c): P2P Request Redirect, P2P Completion Redirect, P2P Egress Control.
ACS_REDIRECT = {0x04: "ReqRedir", 0x08: "CmpltRedir", 0x20: "EgressCtrl"}
DMABUF_KERNEL = (5, 12)  # RDMA dma-buf import (drivers/infiniband/core/umem_dmabuf.c)


def _kernel(release: str | None) -> tuple[int, int] | None:
    parts = (release or "").split("-")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


@check("nccl.gpudirect_rdma", needs=("nccl", "pci"),
       remedy="Load the peer-memory module (modprobe nvidia-peermem, and list it in "
              "/etc/modules-load.d) or use dma-buf: the open NVIDIA kernel modules with a "
              "kernel >= 5.12.",
       actions=(Action.FIX_CONFIG,))
def gpudirect_rdma(ctx: CheckContext) -> Iterator[Finding]:
    """GPUDirect RDMA is possible: nvidia_peermem loaded, or dma-buf (kernel and driver)."""
    if not rdma_present(ctx.snapshot):
        yield Finding.skip(NODE, "no RDMA NIC on this node")
        return
    gdr = nccl_info(ctx.snapshot).gpudirect
    if gdr is None:
        yield Finding.error(NODE, "GPUDirect facts were not collected")
        return
    observed = {"peermem": gdr.peermem, "kernel": gdr.kernel_release, "driver": gdr.driver_line}
    if gdr.peermem:
        yield Finding.passed(NODE, "peer-memory module loaded", observed)
        return
    kernel = _kernel(gdr.kernel_release)
    if kernel is not None and kernel >= DMABUF_KERNEL and gdr.driver_open:
        yield Finding.passed(NODE, "dma-buf: open NVIDIA kernel modules on a kernel >= 5.12",
                             observed)
        return
    if gdr.unreadable:
        yield _unread("GPUDirect RDMA unknown: files that decide it could not be read",
                      gdr.unreadable, observed)
        return
    why = ("proprietary NVIDIA kernel modules (dma-buf needs the open ones)"
           if gdr.driver_open is False else "NVIDIA driver flavour unknown"
           if gdr.driver_open is None else "kernel older than 5.12")
    yield Finding.fail(NODE, f"no GPUDirect RDMA: no nvidia_peermem and no dma-buf ({why})",
                       observed, "nvidia_peermem, or dma-buf", Action.FIX_CONFIG)


def _unread(message: str, unreadable: dict[str, str], observed: dict[str, Any]) -> Finding:
    """Our trouble, not the node's: a file that is there but could not be read (EACCES,
    EIO) leaves the fact unknown, so the check says which and why instead of judging
    without it (issue 12: a failed read is never the absence of what it holds)."""
    return Finding(Status.ERROR, NODE, message, observed={**observed, "unreadable": unreadable},
                   action=Action.INVESTIGATE)


def _endpoints(snap: Snapshot) -> list[Endpoint]:
    return [*gpus(snap), *nics(snap)]


@check("nccl.acs", needs=("pci",), privileged=True,
       remedy="Disable ACS redirection on the switch ports (BIOS: PCIe ACS / VT-d, or "
              "setpci -s BDF ECAP_ACS+0x6.w=0000 at every boot). Virtual machines need ACS: "
              "there enable ATS on the NICs instead.",
       actions=(Action.FIX_CONFIG,))
def acs(ctx: CheckContext) -> Iterator[Finding]:
    """No ACS redirect or egress control on the PCIe bridges above each GPU and NIC."""
    by_bdf: dict[str, PciDevice] = {d.bdf: d for d in ctx.snapshot.pci or []}
    endpoints = _endpoints(ctx.snapshot)
    if not endpoints:
        yield Finding.skip(NODE, "no GPU or NIC on the PCI bus")
        return
    unreadable: dict[str, str] = {}
    checked = 0
    bad = False
    for end in endpoints:
        redirects: dict[str, list[str]] = {}
        for bdf in (end.pci.path[:-1] if end.pci else []):
            bridge = by_bdf.get(bdf)
            if bridge is None or bridge.acs_ctrl is None:
                if bridge is not None and "acs" in bridge.unknown:
                    unreadable[bdf] = bridge.unknown["acs"]
                continue
            checked += 1
            bits = [name for bit, name in ACS_REDIRECT.items() if bridge.acs_ctrl & bit]
            if bits:
                redirects[bdf] = bits
        if redirects:
            bad = True
            yield Finding.fail(end.name, "PCIe ACS redirects peer-to-peer traffic on a bridge "
                               "above this device", redirects, "ACS redirect off",
                               Action.FIX_CONFIG)
    if bad:
        return
    if not checked and unreadable:
        reason = sorted(set(unreadable.values()))[0]
        yield Finding.skip(NODE, f"bridge config space not readable: {reason}")
    elif checked:
        yield Finding.passed(NODE, "no ACS redirect on the bridges above GPUs and NICs",
                             {"bridges": checked})
    else:
        yield Finding.skip(NODE, "no bridge with an ACS capability above GPUs and NICs")


@check("nccl.iommu", needs=("nccl", "pci"),
       remedy="Boot with the IOMMU off or in passthrough (iommu=pt, with intel_iommu=on or "
              "amd_iommu=on where required) and reboot; translated DMA sends GPU-NIC "
              "traffic through the IOMMU and can stall GPUDirect RDMA.",
       actions=(Action.FIX_CONFIG,))
def iommu(ctx: CheckContext) -> Iterator[Finding]:
    """The IOMMU is off or in passthrough for GPUs and NICs (translated DMA hurts GPUDirect)."""
    info = nccl_info(ctx.snapshot).iommu
    if info is None:
        yield Finding.error(NODE, "IOMMU facts were not collected")
        return
    devices = {e.bdf: e.name for e in _endpoints(ctx.snapshot)}
    kinds = {name: info.group_types.get(info.device_groups.get(bdf, ""), "")
             for bdf, name in devices.items()}
    translated = sorted(n for n, kind in kinds.items() if kind in ("DMA", "DMA-FQ"))
    observed = {"cmdline": info.cmdline, "units": info.units}
    if translated:
        status = Finding.fail if rdma_present(ctx.snapshot) else Finding.warn
        yield status(NODE, "IOMMU translates DMA for GPUs/NICs (not passthrough)",
                     {**observed, "translated": translated}, "off or passthrough",
                     Action.FIX_CONFIG)
    elif info.unreadable:
        yield _unread("IOMMU mode unknown: files that decide it could not be read",
                      info.unreadable, observed)
    elif not info.units:
        yield Finding.passed(NODE, "no IOMMU active", observed)
    elif any(k == "identity" for k in kinds.values()) or "iommu=pt" in info.cmdline:
        yield Finding.passed(NODE, "IOMMU in passthrough", observed)
    else:
        yield Finding.warn(NODE, "IOMMU active and its mode for GPUs/NICs is unknown", observed,
                           "off or passthrough", Action.INVESTIGATE)


@check("nccl.host_limits", needs=("nccl", "pci"),
       params={"memlock_fail_mib": 1024, "shm_min_mib": 1024},
       remedy="memlock: '* soft memlock unlimited' and '* hard memlock unlimited' in "
              "/etc/security/limits.conf and LimitMEMLOCK=infinity for slurmd; /dev/shm: "
              "a larger tmpfs; RemoveIPC=no in /etc/systemd/logind.conf.",
       actions=(Action.FIX_CONFIG,))
def host_limits(ctx: CheckContext) -> Iterator[Finding]:
    """Jobs may lock enough memory, /dev/shm is large enough, logind does not remove IPC.

    The locked-memory limit of this process counts only in ``run`` (launched like a job);
    in the agent or a prolog it is clusterdiag's own, so limits.conf and slurmd's decide.
    """
    limits = nccl_info(ctx.snapshot).limits
    if limits is None:
        yield Finding.error(NODE, "host limits were not collected")
        return
    fail_bytes = int(ctx.params.get("memlock_fail_mib") or 0) * MIB
    problems = 0
    for source in limits.memlock:
        own = source.where == "/proc/self/limits"
        if source.limit_bytes is None or source.limit_bytes < 0 or (own and ctx.mode != "run"):
            continue
        problems += 1
        low = source.limit_bytes < fail_bytes and rdma_present(ctx.snapshot)
        status = Finding.fail if low else Finding.warn
        yield status(NODE, "locked-memory limit for jobs is not unlimited (RDMA registration "
                     "fails)", {source.where: source.detail or source.limit_bytes,
                                "propagation": limits.propagate_limits},
                     "unlimited", Action.FIX_CONFIG)
    shm_min = int(ctx.params.get("shm_min_mib") or 0) * MIB
    if limits.shm_bytes is not None and limits.shm_bytes < shm_min:
        problems += 1
        yield Finding.fail(NODE, "/dev/shm is too small for NCCL's shared-memory transport",
                           {"bytes": limits.shm_bytes, "source": limits.shm_source},
                           f">= {shm_min // MIB} MiB", Action.FIX_CONFIG)
    if limits.remove_ipc:
        problems += 1
        yield Finding.warn(NODE, "systemd-logind RemoveIPC=yes can delete NCCL's shared "
                           "memory", limits.remove_ipc_source, "RemoveIPC=no", Action.FIX_CONFIG)
    if limits.unreadable:
        yield _unread("host limits unknown: files that set them could not be read",
                      limits.unreadable, {"propagation": limits.propagate_limits})
    elif not problems:
        yield Finding.passed(NODE, "memlock unlimited, /dev/shm large enough, RemoveIPC off",
                             {"shm_bytes": limits.shm_bytes, "shm_source": limits.shm_source,
                              "remove_ipc": limits.remove_ipc_source})


def _numa(end: Endpoint) -> int | None:
    numa = end.pci.numa_node if end.pci else None
    return numa if numa is not None and numa >= 0 else None


@check("nccl.gpu_nic_affinity", needs=("pci", "infiniband"),
       remedy="Compare with nvidia-smi topo -m: a GPU without its NIC at PIX/PXB sends "
              "through another GPU (PXN) or the CPU; a NIC on the wrong NUMA node usually "
              "means a BIOS/firmware table error (numa_node in sysfs) or a NIC in a wrong slot.",
       actions=(Action.INVESTIGATE,))
def gpu_nic_affinity(ctx: CheckContext) -> Iterator[Finding]:
    """Each GPU has a compute NIC at the PCIe distance its profile expects, on its NUMA node.

    Nearer than the profile's farthest accepted class is fine (a GB200 tray accepts SYS).
    """
    expected = ctx.profile.gpu_nic_distance
    snap = ctx.snapshot
    if not expected:
        yield Finding.skip(NODE, f"profile {ctx.profile.name} expects no GPU-NIC placement")
        return
    all_nics = nics(snap)
    compute = [n for n in all_nics if n.role == "compute"] or [
        n for n in all_nics if n.role == "unknown"]
    gpu_list = gpus(snap)
    if not gpu_list or not compute:
        yield Finding.skip(NODE, "no GPU or no compute NIC found (see gpu.count, ib.hca_count)")
        return
    known = {n.bdf for n in all_nics}
    orphans = [n for n in pci_nics(snap) if n.bdf not in known]

    def acceptable(level: str) -> bool:
        return rank(level) <= max(rank(e) for e in expected)

    chosen: dict[str, str] = {}
    bad = False
    for gpu in gpu_list:
        distance = {nic.name: pair(gpu, nic) for nic in compute}
        best = min(distance.values(), key=rank)
        near = [n for n in compute if distance[n.name] == best]
        nic = next((n for n in near if _numa(n) == _numa(gpu)), near[0])
        chosen[gpu.name] = f"{nic.name} {best}"
        if not acceptable(best):
            bad = True
            if any(acceptable(pair(gpu, n)) for n in orphans):
                yield Finding.skip(gpu.name, "its NIC is on the bus without an RDMA device "
                                   "(see ib.hca_count)")
                continue
            if any(acceptable(pair(gpu, n)) for n in all_nics if n.role != "compute"):
                yield Finding.skip(gpu.name, "the NIC beside it is not a compute rail (see "
                                   "ib.hca_count)")
                continue
            yield Finding.fail(gpu.name, "no compute NIC at the PCIe distance this platform "
                               "expects", distance, list(expected), Action.INVESTIGATE)
        elif None not in (_numa(gpu), _numa(nic)) and _numa(gpu) != _numa(nic):
            bad = True
            yield Finding.warn(nic.name, "compute NIC on a different NUMA node from the GPU it "
                               "serves", {gpu.name: _numa(gpu), nic.name: _numa(nic)},
                               "same NUMA node", Action.INVESTIGATE)
    if not bad:
        yield Finding.passed(NODE, "every GPU has a compute NIC at the expected distance on "
                             "its NUMA node", chosen, list(expected))
