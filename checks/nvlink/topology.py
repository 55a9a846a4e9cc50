"""Where the NVLinks go: nvlink.topology (every GPU pair reaches the others) and
nvlink.remote (each link ends on an NVSwitch, or a GPU of this node)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations

from ...agent.model.gpu import Gpu, NvLink
from ...agent.model.pci import normalize_bdf
from ..core.common import NODE, gpu_component
from ..core.finding import Action, Finding
from ..core.registry import CheckContext, check
from ..profiles.profile import Profile
from .helpers import links_text, nvlink_gpus


@check("nvlink.topology", needs=("nvml",),
       remedy="A GPU pair without NVLink P2P runs NCCL over PCIe or not at all. Look at "
              "nvidia-smi topo -p2p n and nvidia-smi nvlink -s for the GPUs named; on "
              "NVSwitch boards check that Fabric Manager is running and registered every "
              "GPU (fabric.manager, fabric.state). Then reset the GPUs named or reboot.",
       actions=(Action.INVESTIGATE,))
def topology(ctx: CheckContext) -> Iterator[Finding]:
    """Every GPU pair can reach each other over NVLink (NVML P2P status, NVLink index).

    NVML's pairwise ``nvmlDeviceGetP2PStatus(..., NVLINK)`` is the same question NCCL
    and ``nvidia-smi topo -p2p n`` ask; anything but OK for any pair fails, naming the
    pairs and their status in ``observed``. GPUs that are skipped (no NVLink, MIG, not
    answering) are left out of the pairs. On cards bridged in groups (the profile's
    ``nvlink_peers``) each GPU must reach that many others, not every one.
    """
    findings, judged = nvlink_gpus(ctx)
    yield from findings
    if not judged:
        return
    if len(judged) < 2:
        yield Finding.skip(NODE, "fewer than two NVLink GPUs to pair")
        return
    nvml = ctx.snapshot.nvml
    p2p = nvml.p2p_nvlink if nvml is not None else {}
    if not p2p:
        yield Finding.error(NODE, "NVLink P2P status was not read")
        return
    pairs = list(combinations(sorted(gpu.index for gpu in judged), 2))
    bad, unread = _pair_statuses(p2p, pairs)
    if ctx.profile.nvlink_peers is not None:
        yield from _bridged(judged, pairs, bad, unread, ctx.profile.nvlink_peers)
        return
    if bad:
        yield Finding.fail(NODE, "GPU pairs without NVLink P2P", bad, "ok",
                           Action.INVESTIGATE)
    if unread:
        yield Finding.error(NODE, "NVLink P2P status unreadable for some GPU pairs", unread)
    if not bad and not unread:
        yield Finding.passed(NODE, "every GPU pair reaches the others over NVLink",
                             f"{len(pairs)} pairs ok")


def _pair_statuses(p2p: dict[str, str], pairs: list[tuple[int, int]]
                   ) -> tuple[dict[str, str], dict[str, str | None]]:
    """The pairs whose NVLink P2P status is not ok, and those whose status was not read."""
    bad: dict[str, str] = {}
    unread: dict[str, str | None] = {}
    for a, b in pairs:
        key = f"{a}-{b}"
        status = p2p.get(key, p2p.get(f"{b}-{a}"))
        if status is None or status.startswith("error"):
            unread[key] = status
        elif status != "ok":
            bad[key] = status
    return bad, unread


def _bridged(judged: list[Gpu], pairs: list[tuple[int, int]], bad: dict[str, str],
             unread: dict[str, str | None], peers: int) -> Iterator[Finding]:
    """Cards bridged in groups (H100 NVL pairs): each GPU reaches ``peers`` others over
    NVLink, and the rest over PCIe by design, so a pair without NVLink P2P is no fault
    in itself; a GPU that reaches fewer than its peers is (its bridge or links)."""
    reached: dict[int, int] = {gpu.index: 0 for gpu in judged}
    for a, b in pairs:
        key = f"{a}-{b}"
        if key not in bad and key not in unread:
            reached[a] += 1
            reached[b] += 1
    short = {f"gpu{i}": f"{n} NVLink peers" for i, n in sorted(reached.items()) if n < peers}
    if short and unread:
        yield Finding.error(NODE, "NVLink P2P status unreadable for some GPU pairs", unread)
    elif short:
        yield Finding.fail(NODE, "GPUs without their bridged NVLink peers", short,
                           f"{peers} per GPU", Action.INVESTIGATE)
    else:
        yield Finding.passed(NODE, "every GPU reaches its bridged peers over NVLink",
                             f"{sum(reached.values()) // 2} pairs ok")


@check("nvlink.remote", needs=("nvml",),
       remedy="On NVSwitch baseboards (HGX/DGX) every GPU link ends on an NVSwitch; a link "
              "that reports another endpoint points at the baseboard or Fabric Manager's "
              "view of it: compare nvidia-smi nvlink -R with the platform and open a "
              "ticket. On NVL72 trays, a link that ends elsewhere than a switch tray is a "
              "cabling fault: reseat the tray's NVLink connections (cable cartridge). On "
              "boards with direct GPU links, a link must end on another GPU of the node.",
       actions=(Action.INVESTIGATE, Action.RESEAT_CABLE))
def remote(ctx: CheckContext) -> Iterator[Finding]:
    """Each active NVLink ends where the platform says: an NVSwitch, or a local GPU.

    On NVSwitch boards (HGX/DGX A100, H100, H200, B200) every link's peer is a SWITCH
    (NVML remote device type 2); NVML's count of links to an NVSwitch (field 147) equal to the
    active links settles it without a per-link call. On NVL72 trays the peers are the
    switch trays' NVSwitches too; a GPU peer fails, an ``unknown`` peer only warns there
    (no real NVL72 capture of NVML's answer yet). On boards without NVSwitch the peer of
    every link must be a GPU of this node.
    """
    findings, judged = nvlink_gpus(ctx)
    yield from findings
    if not judged:
        return
    profile = ctx.profile
    want_switch = profile.nvswitch or profile.nvl72
    local_gpus = {normalize_bdf(g.pci_bdf) for g in (ctx.snapshot.nvml.gpus
                                                       if ctx.snapshot.nvml else [])}
    local_gpus.discard(None)
    for gpu in judged:
        yield from (_remote_switch(gpu, profile) if want_switch
                    else _remote_gpu(gpu, local_gpus))


def _remote_switch(gpu: Gpu, profile: Profile) -> Iterator[Finding]:
    component = gpu_component(gpu)
    active = [link for link in gpu.nvlinks if link.active]
    if not active:
        yield Finding.skip(component, "no active NVLinks (nvlink.links_up reports it)")
        return
    switch_links = gpu.nvswitch_link_count
    all_switch = switch_links is not None and switch_links == len(active)
    bad: list[tuple[NvLink, str]] = []
    unread: list[int] = []
    for link in active:
        kind = link.remote_type or ("switch" if all_switch else None)
        if kind is None:
            unread.append(link.link)
        elif kind != "switch":
            bad.append((link, kind))
    for link, kind in bad:
        where = f"{component}.link{link.link}"
        observed = {"remote_type": kind, "remote_bdf": link.remote_bdf}
        if profile.nvl72 and not profile.nvswitch:
            if kind == "unknown":
                yield Finding.warn(where, "NVLink endpoint unknown, not an NVSwitch",
                                   observed, "switch", Action.INVESTIGATE)
            else:
                yield Finding.fail(where, f"NVLink ends on a {kind}, not an NVSwitch",
                                   observed, "switch", Action.RESEAT_CABLE)
        else:
            yield Finding.fail(where, f"NVLink ends on a {kind}, not an NVSwitch", observed,
                               "switch", Action.INVESTIGATE)
    if unread:
        if switch_links is not None and switch_links < len(active) and not bad:
            yield Finding.fail(component, "fewer NVLinks end on an NVSwitch than are active",
                               f"{switch_links}/{len(active)}", f"{len(active)}/{len(active)}",
                               Action.INVESTIGATE)
        elif any(k.endswith("remote_type") for k in gpu.errors):
            yield Finding.error(component, "NVLink endpoint type unreadable",
                                {"links": links_text(unread)})
        elif not bad:
            yield Finding.skip(component, "NVML did not report the NVLink endpoints")
    elif not bad:
        yield Finding.passed(component, "every active NVLink ends on an NVSwitch",
                             f"{len(active)} links", "switch")


def _remote_gpu(gpu: Gpu, local_gpus: set[str | None]) -> Iterator[Finding]:
    component = gpu_component(gpu)
    active = [link for link in gpu.nvlinks if link.active]
    if not active:
        yield Finding.skip(component, "no active NVLinks (nvlink.links_up reports it)")
        return
    good = 0
    unread: list[int] = []
    for link in active:
        where = f"{component}.link{link.link}"
        observed = {"remote_type": link.remote_type, "remote_bdf": link.remote_bdf}
        if link.remote_type is None:
            unread.append(link.link)
        elif link.remote_type != "gpu":
            yield Finding.fail(where, f"NVLink ends on a {link.remote_type}, not a GPU",
                               observed, "gpu", Action.INVESTIGATE)
        elif link.remote_bdf and normalize_bdf(link.remote_bdf) not in local_gpus:
            yield Finding.fail(where, "NVLink peer is not a GPU of this node", observed,
                               "a local GPU", Action.INVESTIGATE)
        else:
            good += 1
    if unread and not good:
        yield Finding.skip(component, "NVML did not report the NVLink endpoints")
    elif good == len(active):
        yield Finding.passed(component, "every active NVLink ends on a GPU of this node",
                             f"{good} links", "gpu")
