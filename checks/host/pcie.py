"""host.pcie_aer: PCIe Advanced Error Reporting counters growing between two samples."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ...agent.model.pci import PciDevice
from ..core.finding import Action, Finding, Status
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from .helpers import NODE, since_previous

_AER_TOTALS = {"correctable": "TOTAL_ERR_COR", "nonfatal": "TOTAL_ERR_NONFATAL",
               "fatal": "TOTAL_ERR_FATAL"}


def aer_growth(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """Per-counter growth between two samples. A counter that went down was reset (the
    device was reset or its driver reloaded), so its growth is its new value."""
    growth = {}
    for name, value in after.items():
        old = before.get(name, 0)
        grew = value - old if value >= old else value
        if grew:
            growth[name] = grew
    return growth


def _aer_total(category: str, counters: Mapping[str, int], growth: Mapping[str, int]) -> int:
    """Growth of the kernel's TOTAL_ERR_* counter, or of the sum when a device lacks it."""
    total = _AER_TOTALS[category]
    return growth.get(total, 0) if total in counters else sum(growth.values())


@parameters
class PcieAerParams(Params):
    nonfatal_fail: bool = param(False, doc="a non-fatal uncorrectable error fails (else warns)")
    correctable_per_min_warn: float = param(
        10.0, ge=0, doc="correctable errors a minute per device above which it warns")


@check("host.pcie_aer", needs=("pci",), rate=True, params=PcieAerParams,
       remedy="Errors on one device: reseat it or its riser/cable, then RMA if they return. "
              "Fatal errors leave the device unusable until a reset: reboot.",
       actions=(Action.REBOOT, Action.INVESTIGATE))
def pcie_aer(ctx: CheckContext) -> Iterator[Finding]:
    """Growth of PCIe AER counters between two samples, per device.

    A fatal uncorrectable error leaves the link down until a reset: fail, reboot. A
    non-fatal uncorrectable error (completion timeout, poisoned TLP) was survived but
    lost a transaction: warn, or fail when ``nonfatal_fail``. Correctable errors were
    fixed by the link (replays); a healthy link has almost none, and DCGM allows about
    one replay a minute per lane, so ``correctable_per_min_warn`` = 10 per device warns
    well before an x16 link reaches DCGM's limit, with receiver errors counted too.
    """
    now, elapsed = ctx.snapshot.pci, since_previous(ctx)
    before = ctx.previous.pci if ctx.previous is not None else None
    if now is None:
        yield Finding.error(NODE, "PCI devices were not collected", ctx.snapshot.sources.get("pci"))
        return
    if before is None or elapsed is None or elapsed <= 0:
        yield Finding.skip(NODE, "needs an earlier sample of this node")
        return
    earlier = {d.bdf: d for d in before if d.aer}
    pairs = [(earlier[d.bdf], d) for d in now if d.aer and d.bdf in earlier]
    if not pairs:
        yield Finding.skip(NODE, "no PCI device exposes AER counters")
        return
    findings = [f for old, new in pairs for f in _aer_device(ctx, old, new, elapsed)]
    yield from findings or [Finding.passed(NODE, "no PCIe AER errors between samples",
                                           len(pairs))]


def _aer_device(ctx: CheckContext, old: PciDevice, new: PciDevice,
                elapsed: float) -> Iterator[Finding]:
    growth = {cat: aer_growth(old.aer.get(cat, {}), new.aer.get(cat, {}))
              for cat in _AER_TOTALS}
    fatal, nonfatal, correctable = (_aer_total(cat, new.aer.get(cat, {}), growth[cat])
                                    for cat in ("fatal", "nonfatal", "correctable"))
    per_min = round(correctable * 60.0 / elapsed, 2)
    params = PcieAerParams.of(ctx)
    if fatal:
        yield Finding.fail(new.bdf, "PCIe fatal errors (AER) increased", growth["fatal"], 0,
                           Action.REBOOT)
    if nonfatal:
        status = Status.FAIL if params.nonfatal_fail else Status.WARN
        yield Finding(status, new.bdf, "PCIe non-fatal errors (AER) increased",
                      growth["nonfatal"], 0, Action.INVESTIGATE)
    if per_min > params.correctable_per_min_warn:
        yield Finding.warn(new.bdf, "PCIe correctable error rate (AER) high",
                           {"per_min": per_min, **growth["correctable"]},
                           f"<= {params.correctable_per_min_warn}/min")
