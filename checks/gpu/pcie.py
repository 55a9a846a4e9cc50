"""The GPU's PCIe link: gpu.pcie_link (width and generation) and gpu.pcie_replay_rate."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

from ...agent.model import Snapshot
from ...agent.model.gpu import Gpu
from ...agent.model.pci import gen_from_gts, normalize_bdf
from ...agent.model.record import record
from ..core.common import NODE, gpu_component, previous_gpu
from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.rates import DEFAULT_MIN_EVENTS, MIN_EVENTS_DOC, counter_rate, sample_interval
from ..core.registry import CheckContext, check
from .helpers import FIELDS, answering_gpus, missing


@record(frozen=True)
class LinkView:
    """What the GPU's link is and what it should be, from NVML, sysfs and the profile."""

    gen: int | None
    width: int | None
    max_gen: int | None
    max_width: int | None


def link_view(snap: Snapshot, gpu: Gpu, profile_gen: int | None,
              profile_width: int | None) -> LinkView:
    """Expected = the smallest of the GPU's and its upstream port's capability and the
    profile, so a Gen4 slot or an x8 bifurcation is not blamed on the GPU."""
    pci = {normalize_bdf(d.bdf): d for d in snap.pci or []}
    dev = pci.get(normalize_bdf(gpu.pci_bdf))
    parent = pci.get(normalize_bdf(dev.path[-2])) if dev is not None and len(dev.path) >= 2 \
        else None
    ends = [d for d in (dev, parent) if d is not None]
    gens = [g for d in ends if (g := gen_from_gts(d.max_link_speed_gts))] + \
        ([profile_gen] if profile_gen else [])
    widths = [w for d in ends if (w := d.max_link_width)] + \
        ([profile_width] if profile_width else [])
    gen = gpu.pcie_gen_current
    if gen is None and dev is not None:
        gen = gen_from_gts(dev.current_link_speed_gts)
    width = gpu.pcie_width_current
    if width is None and dev is not None:
        width = dev.current_link_width
    return LinkView(gen, width, min(gens) if gens else None, min(widths) if widths else None)


@check("gpu.pcie_link", needs=("nvml", "pci"),
       remedy="A GPU link narrower than its slot is a physical fault: reseat the GPU or "
              "its riser/cable, check the slot, then have the board inspected (a reboot "
              "retrains the link but rarely restores lanes). A slower generation under load "
              "points at signal integrity or a BIOS setting (slot forced to a lower Gen).",
       actions=(Action.INVESTIGATE,))
def pcie_link(ctx: CheckContext) -> Iterator[Finding]:
    """PCIe link width at its maximum; generation at its maximum when the GPU is in P0.

    Width is judged always. The generation drops at idle by design (P8 runs Gen1,
    open-gpu-kernel-modules#731), so it is judged only in P-state 0. Expected values are the smaller
    of the GPU's and the upstream port's capability (sysfs) and the profile.
    """
    gpus, skips = answering_gpus(ctx)
    yield from skips
    prof = ctx.profile
    for gpu in gpus:
        comp = gpu_component(gpu)
        link = link_view(ctx.snapshot, gpu, prof.gpu_pcie_gen, prof.gpu_pcie_width)
        if link.width is None:
            yield missing(gpu, "PCIe link width", "pcie_width_current")
        elif link.max_width is None:
            yield Finding.skip(comp, "no expected PCIe width (not in sysfs or the profile)",
                               link.width)
        elif link.width < link.max_width:
            # DCGM's pcie plugin fails below min_pci_width (NVIDIA/DCGM).
            yield Finding.fail(comp, "PCIe link narrower than its maximum", f"x{link.width}",
                               f"x{link.max_width}", Action.INVESTIGATE)
        else:
            yield Finding.passed(comp, "PCIe link width at maximum", f"x{link.width}",
                                 f"x{link.max_width}")
        pstate = gpu.performance_state
        observed = {"gen": link.gen, "pstate": pstate}
        if link.gen is None:
            yield missing(gpu, "PCIe link generation", "pcie_gen_current")
        elif link.max_gen is None:
            yield Finding.skip(comp, "no expected PCIe generation (not in sysfs or the "
                                     "profile)", observed)
        elif pstate != 0:
            yield Finding.passed(comp, "PCIe generation not judged at idle (P-state not 0)",
                                 observed, f"Gen{link.max_gen} in P0")
        elif link.gen < link.max_gen:
            # In P0 the link runs at its top speed (open-gpu-kernel-modules#731): a lower Gen here
            # is a downtrained link that caps H2D and GPUDirect RDMA bandwidth.
            yield Finding.fail(comp, "PCIe link slower than its maximum generation in P0",
                               observed, f"Gen{link.max_gen}", Action.INVESTIGATE)
        else:
            yield Finding.passed(comp, "PCIe generation at maximum", observed,
                                 f"Gen{link.max_gen}")


@parameters
class PcieReplayParams(Params):
    per_lane_per_min: Mapping[int, float] = param(
        {1: 0.15, 2: 0.3, 3: 0.48, 4: 0.96, 5: 1.92, 6: 3.84}, ge=0,
        doc="replays a minute allowed per lane, by PCIe generation: the limit is ceil(rate "
        "x lanes), DCGM's health watch (DCGM common/DcgmGPUHardwareLimits.h)")
    max_per_min: float | None = param(
        None, ge=0, doc="a fixed limit in replays a minute instead of the per-lane rule")
    min_events: int = param(DEFAULT_MIN_EVENTS, ge=1, doc=MIN_EVENTS_DOC)


@check("gpu.pcie_replay_rate", needs=("nvml", "pci"), rate=True, params=PcieReplayParams,
       remedy="A fast-growing replay counter means a marginal PCIe link (retransmitted "
              "packets): reseat the GPU or riser, check the slot and PCIe AER counters of "
              "the upstream port, then have the board inspected.",
       actions=(Action.INVESTIGATE,))
def pcie_replay_rate(ctx: CheckContext) -> Iterator[Finding]:
    """PCIe replay counter growth stays under DCGM's per-lane, per-generation rate.

    Needs two samples (``--level full`` or the agent's history) and at least
    ``min_events`` replays between them before a rate is judged.
    """
    dt = sample_interval(ctx.previous, ctx.snapshot)
    if dt is None:
        yield Finding.skip(NODE, "needs an earlier sample (--level full or the agent)")
        return
    gpus, skips = answering_gpus(ctx)
    yield from skips
    params = PcieReplayParams.of(ctx)
    prof, min_events = ctx.profile, params.min_events
    for gpu in gpus:
        comp, prev = gpu_component(gpu), previous_gpu(ctx.previous, gpu)
        if gpu.pcie_replay_count is None:
            yield missing(gpu, "PCIe replay counter", "pcie_replay_count", FIELDS)
            continue
        rate = counter_rate(prev.pcie_replay_count if prev else None, gpu.pcie_replay_count, dt)
        if rate is None:
            yield Finding.skip(comp, "GPU not in the earlier sample")
            continue
        limit = _replay_limit(params, link_view(ctx.snapshot, gpu, prof.gpu_pcie_gen,
                                                    prof.gpu_pcie_width))
        if limit is None:
            yield Finding.skip(comp, "PCIe generation and width unknown: no replay limit",
                               rate.to_dict())
        elif rate.over_per_min(limit, min_events):
            yield Finding.warn(comp, "PCIe replay rate above the limit",
                               {**rate.to_dict(), "min_events": min_events},
                               f"<= {limit:g} per min", Action.INVESTIGATE)
        else:
            yield Finding.passed(comp, "PCIe replay rate within the limit",
                                 {**rate.to_dict(), "min_events": min_events},
                                 f"<= {limit:g} per min")


def _replay_limit(params: PcieReplayParams, link: LinkView) -> float | None:
    if params.max_per_min is not None:
        return params.max_per_min
    gen = max(g for g in (link.gen, link.max_gen, 0) if g is not None)
    lanes = max(w for w in (link.width, link.max_width, 0) if w is not None)
    per_lane = params.per_lane_per_min.get(gen)
    if not gen or not lanes or per_lane is None:
        return None
    return float(math.ceil(per_lane * lanes))
