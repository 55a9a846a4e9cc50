"""NVLink5 per-link health: nvlink.speed (each fully active link at the platform's speed),
nvlink.ber (the bit error rates NVML computes) and nvlink.fec_history (the FEC bins, as
figures).

Sources: NVIDIA Health Validation's ``nvlink_bandwidth_count_speed`` expects 18 links at
53,125 MB/s on GB200 and GB300 (docs.nvidia.com/health-validation/reference/checks/nvlink);
DCGM 4.6.0 judges the effective BER against 1e-12 (common/DcgmUtilities.cpp
IsEffectiveBerThresholdExceeded) and the symbol BER against a floor of 15 x 10^-238 on
Blackwell (modules/health/DcgmHealthWatch.cpp IsSymbolBerThresholdExceeded,
common/DcgmGPUHardwareLimits.h DCGM_SYMBOL_BER_FLOOR_EXP_AGGREGATED); no published
threshold exists for the FEC history bins.
"""

from __future__ import annotations

from collections.abc import Iterator

from ...agent.model.gpu import Gpu
from ...agent.model.record import record
from ..core.common import NODE, gpu_component, previous_gpu
from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.rates import counter_growth, sample_interval
from ..core.registry import CheckContext, check
from ..core.validation import NVLINK
from .helpers import idle_reason, link_errors, links_text, nvlink_gpus, reduced_bw_mode


def _idle_note(idle: dict[str, list[int]]) -> str:
    return "; ".join(f"{reason}: {links_text(links)}" for reason, links in sorted(idle.items()))


@check("nvlink.speed", needs=("nvml",),
       remedy="A link up at less than its full speed trained down: reset the GPU "
              "(nvidia-smi -r -i N, with no process on it) to retrain its links and look "
              "again (nvidia-smi nvlink -s). A link that trains down again is its cable "
              "cartridge or connector: reseat the tray's NVLink connections, then run the "
              "field diagnostics. Under a reduced NVLink bandwidth mode the site set, the "
              "links run slower by design: set the mode back to FULL where the site did "
              "not mean it; a site that runs its links slower on purpose sets "
              "nvlink_link_speed_mbps in its site profile.",
       actions=(Action.RESET_GPU, Action.INVESTIGATE))
def speed(ctx: CheckContext) -> Iterator[Finding]:
    """Every fully active NVLink runs at the platform's per-link speed.

    Each link NVML reports active (NVML_FI_DEV_NVLINK_GET_STATE 1) in its high-speed power
    state is compared with the profile's ``nvlink_link_speed_mbps``
    (NVML_FI_DEV_NVLINK_GET_SPEED, MB/s): 53,125 on GB200 and GB300, NVIDIA Health
    Validation's expectation. A slower link fails, one finding per link
    (``gpu3.link7``). A link asleep, with its traffic disabled or in the low-power state
    runs slower by design: it is named in the GPU's finding, never failed. A link that is
    down is nvlink.links_up's. Where the site set a reduced NVLink bandwidth mode for the
    node (nvmlSystemGetNvlinkBwMode answers HALF, 3QUARTER, MIN or OFF, not FULL), slower
    links are the mode's doing: the GPU warns naming the mode and the speeds read, never
    fails.

    Where the mode was not read, it is not taken for FULL: nvml.h answers
    nvmlSystemGetNvlinkBwMode NO_PERMISSION to a user other than root, and the agent runs
    as one (systemd/clusterdiag-agent.service). Every active link of every GPU at one
    and the same lower speed is what a site-set mode looks like, not links that trained
    down one by one: each GPU warns, naming the speeds and the unread mode. A slow link
    beside links at full speed is no mode's doing and still fails. (The root prolog
    re-runs only checks the agent skipped, and no source says the per-device
    nvmlDeviceGetNvlinkBwMode answers a user the system call refuses: neither would
    settle the mode where the agent could not.)
    """
    findings, judged = nvlink_gpus(ctx)
    yield from findings
    want = ctx.profile.nvlink_link_speed_mbps
    if want is None:
        if judged:
            yield Finding.skip(NODE, "profile names no per-link NVLink speed")
        return
    excuse = _slow_excuse(ctx, judged, want)
    for gpu in judged:
        yield from _gpu_speed(gpu, want, excuse)


@record
class _SlowExcuse:
    """Why links below full speed warn rather than fail, as the warning words it."""

    message: str
    note: str  # what the observed value adds


def _slow_excuse(ctx: CheckContext, gpus: list[Gpu], want: int) -> _SlowExcuse | None:
    """The site's reduced bandwidth mode, read; or, with the mode unread, every judged
    link of every GPU at one speed below ``want``; None where slow links fail."""
    mode = reduced_bw_mode(ctx)
    if mode is not None:
        return _SlowExcuse(f"NVLinks slower under the site's reduced NVLink bandwidth mode "
                           f"{mode}", f"NVLink bandwidth mode {mode}")
    nvml = ctx.snapshot.nvml
    if nvml is None or nvml.nvlink_bw_mode is not None:
        return None
    speeds = {link.speed_mbps for gpu in gpus for link in gpu.nvlinks
              if link.active and idle_reason(link) is None and link.speed_mbps is not None}
    if len(speeds) == 1 and min(speeds) < want:
        return _SlowExcuse("NVLinks all at one lower speed with the NVLink bandwidth mode "
                           "unread: looks like a reduced mode the site set",
                           "NVLink bandwidth mode not read")
    return None


def _gpu_speed(gpu: Gpu, want: int, excuse: _SlowExcuse | None) -> Iterator[Finding]:
    component = gpu_component(gpu)
    idle: dict[str, list[int]] = {}
    full: list[int] = []
    unread: list[int] = []
    slower: dict[int, int] = {}  # link -> MB/s, below ``want``
    for link in gpu.nvlinks:
        reason = idle_reason(link)
        if reason is not None:
            idle.setdefault(reason, []).append(link.link)
        elif not link.active:
            continue
        elif link.speed_mbps is None:
            unread.append(link.link)
        elif link.speed_mbps < want:
            slower[link.link] = link.speed_mbps
            if excuse is None:
                yield Finding.fail(f"{component}.link{link.link}",
                                   "NVLink below its full speed", f"{link.speed_mbps} MB/s",
                                   f"{want} MB/s", Action.RESET_GPU)
        else:
            full.append(link.link)
    if slower and excuse is None:
        return
    if unread:
        yield Finding.error(component, "NVLink speed unreadable for some links",
                            {"links": links_text(unread), **link_errors(gpu)})
    elif slower and excuse is not None:
        observed = f"{_speeds_text(slower, full, want)} ({excuse.note})"
        if idle:
            observed += f" (not judged, {_idle_note(idle)})"
        yield Finding.warn(component, excuse.message, observed, f"{want} MB/s in mode FULL",
                           Action.INVESTIGATE)
    elif full or idle:
        observed = f"{len(full)} links at {want} MB/s"
        if idle:
            observed += f" (not judged, {_idle_note(idle)})"
        if excuse is not None:
            observed += f" ({excuse.note})"
        yield Finding.passed(component, "NVLinks at full speed", observed, f"{want} MB/s")
    else:
        yield Finding.skip(component, "no active NVLink to judge")


def _speeds_text(slower: dict[int, int], full: list[int], want: int) -> str:
    """``16 links at 26562 MB/s, 2 at 53125 MB/s``: the speeds read, most links first."""
    counts: dict[int, int] = {}
    for mbps in slower.values():
        counts[mbps] = counts.get(mbps, 0) + 1
    if full:
        counts[want] = len(full)
    ordered = sorted(counts.items(), key=lambda item: (-item[1], -item[0]))
    return ", ".join(f"{n} {'links ' if i == 0 else ''}at {mbps} MB/s"
                     for i, (mbps, n) in enumerate(ordered))


@parameters
class BerParams(Params):
    effective_ber_fail: float = param(
        1e-12, ge=0, doc="effective BER (after FEC) above which a link fails: DCGM 4.6's "
        "threshold (common/DcgmUtilities.cpp IsEffectiveBerThresholdExceeded)")
    symbol_ber_warn: float = param(
        15e-238, ge=0, doc="symbol BER (before FEC) above which a link warns: DCGM 4.6's "
        "Blackwell floor, 15 x 10^-238 (DcgmGPUHardwareLimits.h)")


@check("nvlink.ber", validation=NVLINK, needs=("nvml",), params=BerParams,
       remedy="An effective bit error rate above 1e-12 is a link that corrupts data FEC "
              "could not correct: reset the GPU to retrain the link and look again; a link "
              "that comes back above the threshold is its cable cartridge, connector or the "
              "GPU: reseat the tray's NVLink connections and run the field diagnostics "
              "(DCGM's next step for this error). A symbol BER above DCGM's floor alone is a "
              "marginal link FEC still corrects: watch it.",
       actions=(Action.RESET_GPU, Action.INVESTIGATE))
def ber(ctx: CheckContext) -> Iterator[Finding]:
    """Each active NVLink5 link's bit error rates, as NVML computes them.

    NVML answers the effective BER (errors left after FEC) and the symbol BER (before FEC)
    per link, packed as a mantissa and a power of ten (agent/model/nvlink_ber.py). An
    effective BER above ``effective_ber_fail`` (1e-12, DCGM 4.6) fails the link; a symbol
    BER above ``symbol_ber_warn`` (DCGM's Blackwell floor) warns. Judged on whatever GPU
    answers the fields, whatever profile was detected: the rates are NVML's own. Earlier
    NVLink generations have no such fields: the check skips.
    """
    findings, judged = nvlink_gpus(ctx, by_profile=False)
    yield from findings
    params = BerParams.of(ctx)
    judged_any = False
    for gpu in judged:
        component = gpu_component(gpu)
        links = [link for link in gpu.nvlinks if link.active
                 and (link.effective_ber is not None or link.symbol_ber is not None)]
        if not links:
            continue
        judged_any = True
        bad = False
        for link in links:
            where = f"{component}.link{link.link}"
            if link.effective_ber is not None and link.effective_ber > params.effective_ber_fail:
                bad = True
                yield Finding.fail(where, "NVLink effective bit error rate above threshold",
                                   f"{link.effective_ber:.1e}",
                                   f"<= {params.effective_ber_fail:.0e}", Action.RESET_GPU)
            elif link.symbol_ber is not None and link.symbol_ber > params.symbol_ber_warn:
                bad = True
                yield Finding.warn(where, "NVLink symbol bit error rate above DCGM's floor",
                                   f"{link.symbol_ber:.1e}",
                                   f"<= {params.symbol_ber_warn:.1e}", Action.INVESTIGATE)
        if not bad:
            worst = max((link.effective_ber or 0.0) for link in links)
            yield Finding.passed(component, "NVLink bit error rates within limits",
                                 f"{len(links)} links, worst effective BER {worst:.1e}",
                                 f"<= {params.effective_ber_fail:.0e}")
    if judged and not judged_any:
        yield Finding.skip(NODE, "no NVLink bit error rates reported (NVLink5 fields)")


@check("nvlink.fec_history", validation=NVLINK, needs=("nvml",), rate=True,
       remedy="Figures only: no threshold is published for the FEC history bins. Compare a "
              "link's bins with its peers' when nvlink.ber or nvlink.error_rate points at it.",
       actions=(Action.NONE,))
def fec_history(ctx: CheckContext) -> Iterator[Finding]:
    """Each GPU's NVLink5 FEC history between two samples, as figures, never a verdict.

    NVML counts the symbol errors FEC corrected in 16 bins per link
    (NVML_FI_DEV_NVLINK_COUNT_FEC_HISTORY_0 to _15). NVIDIA publishes no threshold for
    them, so the check passes with the growth of each bin over the interval, summed over
    the GPU's active links, for a person to compare with the GPU's peers. Read only at
    ``--level full`` (16 values per link in the per-link batch).
    """
    findings, judged = nvlink_gpus(ctx, by_profile=False)
    yield from findings
    if not judged:
        return
    dt = sample_interval(ctx.previous, ctx.snapshot)
    reported = False
    for gpu in judged:
        old = previous_gpu(ctx.previous, gpu)
        bins = _bin_growth(gpu, old)
        if bins is None:
            continue
        reported = True
        yield Finding.passed(gpu_component(gpu), "NVLink FEC history (figures, no threshold)",
                             {"bins": bins, "seconds": None if dt is None else round(dt, 1)},
                             "no published threshold")
    if not reported:
        yield Finding.skip(NODE, "no NVLink FEC history in two samples (NVLink5 fields)")


def _bin_growth(gpu: Gpu, old: Gpu | None) -> list[int] | None:
    """Per bin, the corrected symbol errors counted between the samples over the GPU's
    active links (a reset link counts from its reset); None with nothing to compare."""
    if old is None:
        return None
    before = {link.link: link.fec_history for link in old.nvlinks}
    total: list[int] | None = None
    for link in gpu.nvlinks:
        prev = before.get(link.link)
        if not link.active or link.fec_history is None or prev is None:
            continue
        total = total or [0] * len(link.fec_history)
        for i, (was, now) in enumerate(zip(prev, link.fec_history, strict=False)):
            growth = counter_growth(was, now)
            if growth is not None:
                total[i] += growth[0]
    return total
