"""The PCIe path between GPUs and NICs: nccl.acs (no ACS redirection on the switches
between them) and nccl.iommu (no IOMMU translation in the way)."""

from __future__ import annotations

from collections.abc import Iterator

from ...agent.model.pci import PciDevice
from ..core.finding import Action, Finding
from ..core.registry import CheckContext, check
from .helpers import NODE, gpus_and_nics, nccl_info, rdma_present, unread

# ACS Control bits that send peer-to-peer TLPs up to the root complex (pci_regs.h,
# pciutils ls-ecaps.c): P2P Request Redirect, P2P Completion Redirect, P2P Egress Control.
ACS_REDIRECT = {0x04: "ReqRedir", 0x08: "CmpltRedir", 0x20: "EgressCtrl"}


@check("nccl.acs", needs=("pci",), privileged=True,
       remedy="Disable ACS redirection on the switch ports (BIOS: PCIe ACS / VT-d, or "
              "setpci -s BDF ECAP_ACS+0x6.w=0000 at every boot). Virtual machines need ACS: "
              "there enable ATS on the NICs instead.",
       actions=(Action.FIX_CONFIG,))
def acs(ctx: CheckContext) -> Iterator[Finding]:
    """No ACS redirect or egress control on the PCIe bridges above each GPU and NIC."""
    by_bdf: dict[str, PciDevice] = {d.bdf: d for d in ctx.snapshot.pci or []}
    endpoints = gpus_and_nics(ctx.snapshot)
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
       actions=(Action.FIX_CONFIG, Action.INVESTIGATE))
def iommu(ctx: CheckContext) -> Iterator[Finding]:
    """The IOMMU is off or in passthrough for GPUs and NICs (translated DMA hurts GPUDirect)."""
    info = nccl_info(ctx.snapshot).iommu
    if info is None:
        yield Finding.error(NODE, "IOMMU facts were not collected")
        return
    devices = {e.bdf: e.name for e in gpus_and_nics(ctx.snapshot)}
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
        yield unread("IOMMU mode unknown: files that decide it could not be read",
                      info.unreadable, observed)
    elif not info.units:
        yield Finding.passed(NODE, "no IOMMU active", observed)
    elif any(k == "identity" for k in kinds.values()) or "iommu=pt" in info.cmdline:
        yield Finding.passed(NODE, "IOMMU in passthrough", observed)
    else:
        yield Finding.warn(NODE, "IOMMU active and its mode for GPUs/NICs is unknown", observed,
                           "off or passthrough", Action.INVESTIGATE)
