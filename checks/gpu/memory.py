"""GPU memory: ECC mode and counts, retired pages, row remapping, and the memory size.

Counts are the
volatile ones (since the last driver load or GPU reset) wherever a reset clears the fault:
an aggregate (lifetime) count stays high forever after one bad day, so it says nothing
about whether the GPU is ready now. Thresholds follow DCGM and NVIDIA's memory-error
management guide (docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ...agent.model.gpu import Gpu
from ..core.common import NODE, gpu_component, previous_gpu
from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.rates import DEFAULT_MIN_EVENTS, MIN_EVENTS_DOC, counter_rate, sample_interval
from ..core.registry import CheckContext, check
from .helpers import FIELDS, answering_gpus, missing

GIB = 1 << 30


@parameters
class EccModeParams(Params):
    required: bool = param(True, doc="disabled ECC fails (false: it is noted, not judged)")


@check("gpu.ecc_mode", needs=("nvml",), params=EccModeParams,
       remedy="Enable ECC (`nvidia-smi -i N -e 1`) and reboot (or reset the GPU) to apply it. "
              "A pending change only takes effect after the reboot.",
       actions=(Action.FIX_CONFIG, Action.REBOOT))
def ecc_mode(ctx: CheckContext) -> Iterator[Finding]:
    """ECC is enabled now and stays enabled after the next reboot.

    Disabled ECC fails when ``required`` (default): memory errors then corrupt training
    silently, and the uncorrected-error, row-remap and Xid 48 checks go blind. Imbue's
    checks require ECC mode Enabled (health_checks.py). A pending mode that differs from the
    current one warns: it takes effect at the next reboot.
    """
    gpus, skips = answering_gpus(ctx)
    yield from skips
    required = EccModeParams.of(ctx).required
    for gpu in gpus:
        comp, cur, pending = gpu_component(gpu), gpu.ecc_enabled, gpu.ecc_pending
        if cur is None:
            yield missing(gpu, "ECC mode", "ecc_enabled", FIELDS)
            continue
        observed = {"current": _on(cur), "pending": _on(pending)}
        if not cur and required:
            if pending:
                yield Finding.fail(comp, "ECC disabled (enabled at the next reboot)", observed,
                                   "enabled", Action.REBOOT)
            else:
                yield Finding.fail(comp, "ECC disabled", observed, "enabled", Action.FIX_CONFIG)
        elif pending is not None and pending != cur:
            yield Finding.warn(comp, "ECC mode change pending: reboot to apply", observed,
                               _on(cur), Action.FIX_CONFIG if cur else Action.REBOOT)
        else:
            yield Finding.passed(comp, f"ECC {_on(cur)}", observed,
                                 "enabled" if required else None)


def _on(flag: bool | None) -> str | None:
    return None if flag is None else ("enabled" if flag else "disabled")


@parameters
class EccUncorrectedParams(Params):
    max_volatile: int = param(
        0, ge=0, doc="uncorrected (volatile) ECC errors a GPU may have. DCGM health MEM: "
        "any volatile DBE fails; Imbue and CHS: uncorrected volatile must be 0 (DCGM's "
        "DcgmHealthWatch.cpp; Imbue's health_checks.py)")


@check("gpu.ecc_uncorrected", needs=("nvml",), params=EccUncorrectedParams,
       remedy="Drain the node and reset the GPU (`nvidia-smi -r -i N`, no processes on it) "
              "or reboot, so the pending row remap takes effect; then check gpu.row_remap.",
       actions=(Action.RESET_GPU,))
def ecc_uncorrected(ctx: CheckContext) -> Iterator[Finding]:
    """No uncorrected ECC error since the last driver load or GPU reset (volatile count).

    Aggregate (lifetime) counts are never judged: one old error would fail the GPU
    forever. (The SRAM RMA threshold is judged by ``gpu.row_remap`` with the other
    repair limits.)
    """
    gpus, skips = answering_gpus(ctx)
    yield from skips
    limit = EccUncorrectedParams.of(ctx).max_volatile
    for gpu in gpus:
        comp, count = gpu_component(gpu), gpu.ecc_volatile_uncorrected
        if count is None:
            yield missing(gpu, "volatile uncorrected ECC count", "ecc_volatile_uncorrected",
                          FIELDS)
        elif count > limit:
            yield Finding.fail(comp, "uncorrected ECC errors since the last reset", count,
                               f"<= {limit}", Action.RESET_GPU)
        else:
            yield Finding.passed(comp, "no uncorrected ECC errors since the last reset", count,
                                 f"<= {limit}")


@parameters
class EccCorrectedRateParams(Params):
    max_per_min: float = param(
        6.0, ge=0, doc="corrected ECC errors a minute a GPU may add. No peer thresholds a "
        "corrected-ECC rate (DCGM and gpud export it; AzNHC and GCM threshold lifetime "
        "totals of 2e7 / 5e7). Healthy HBM corrects a handful of errors a day; several a "
        "minute is an error storm, the condition the driver reports as Xid 92 "
        "(EXCESSIVE_SBE_INTERRUPTS). Our choice")
    min_events: int = param(DEFAULT_MIN_EVENTS, ge=1, doc=MIN_EVENTS_DOC)


@check("gpu.ecc_corrected_rate", needs=("nvml",), rate=True, params=EccCorrectedRateParams,
       remedy="Corrected errors do not corrupt data, but a fast-growing count often comes "
              "before uncorrectable ones: watch gpu.row_remap, schedule a GPU reset, and "
              "have the GPU inspected if the rate persists.",
       actions=(Action.INVESTIGATE,))
def ecc_corrected_rate(ctx: CheckContext) -> Iterator[Finding]:
    """Corrected ECC errors do not grow faster than ``max_per_min`` (volatile counts).

    Needs two samples (``--level full`` or the agent's history) and at least
    ``min_events`` corrected errors between them before a rate is judged.
    """
    dt = sample_interval(ctx.previous, ctx.snapshot)
    if dt is None:
        yield Finding.skip(NODE, "needs an earlier sample (--level full or the agent)")
        return
    gpus, skips = answering_gpus(ctx)
    yield from skips
    params = EccCorrectedRateParams.of(ctx)
    limit, min_events = params.max_per_min, params.min_events
    for gpu in gpus:
        comp, prev = gpu_component(gpu), previous_gpu(ctx.previous, gpu)
        if gpu.ecc_volatile_corrected is None:
            yield missing(gpu, "volatile corrected ECC count", "ecc_volatile_corrected", FIELDS)
            continue
        rate = counter_rate(prev.ecc_volatile_corrected if prev else None,
                            gpu.ecc_volatile_corrected, dt)
        if rate is None:
            yield Finding.skip(comp, "GPU not in the earlier sample")
        elif rate.over_per_min(limit, min_events):
            yield Finding.warn(comp, "corrected ECC errors growing fast",
                               {**rate.to_dict(), "min_events": min_events},
                               f"<= {limit:g} per min", Action.INVESTIGATE)
        else:
            yield Finding.passed(comp, "corrected ECC error rate within the limit",
                                 {**rate.to_dict(), "min_events": min_events},
                                 f"<= {limit:g} per min")


@parameters
class RetiredPagesParams(Params):
    max_pages: int = param(
        63, ge=0, doc="retired pages at which a GPU fails. DCGM_LIMIT_MAX_RETIRED_PAGES: 63 "
        "fail (DcgmGPUHardwareLimits.h); NVIDIA's guide allows 64 retirements per GPU "
        "(a100-gpu-mem-error-mgmt)")


@check("gpu.retired_pages", needs=("nvml",), params=RetiredPagesParams,
       remedy="Pending retirement: reset the GPU or reboot so the page is retired. At the "
              "retirement limit the GPU can no longer retire bad pages: collect "
              "nvidia-bug-report.sh and open an RMA case.",
       actions=(Action.RESET_GPU, Action.RMA))
def retired_pages(ctx: CheckContext) -> Iterator[Finding]:
    """Page retirement (pre-Ampere): nothing pending, and fewer than ``max_pages`` retired.

    Ampere and later replace page retirement with row remapping and report it as not
    supported: those GPUs skip here and are judged by ``gpu.row_remap``.
    """
    gpus, skips = answering_gpus(ctx)
    yield from skips
    limit = RetiredPagesParams.of(ctx).max_pages
    for gpu in gpus:
        comp = gpu_component(gpu)
        sbe, dbe, pending = gpu.retired_pages_sbe, gpu.retired_pages_dbe, gpu.retired_pending
        if sbe is None and dbe is None and pending is None:
            yield missing(gpu, "page retirement", "retired_pages_sbe", "retired_pages_dbe",
                          "retired_pending", FIELDS)
            continue
        total = (sbe or 0) + (dbe or 0)
        observed = {"sbe": sbe, "dbe": dbe, "pending": pending}
        bad = False
        if pending:
            bad = True
            yield Finding.fail(comp, "page retirement pending: reset the GPU", observed,
                               "no pending retirement", Action.RESET_GPU)
        if total >= limit:
            bad = True
            yield Finding.fail(comp, "retired pages at the RMA limit", observed,
                               f"< {limit} pages", Action.RMA)
        if not bad:
            yield Finding.passed(comp, "page retirement within limits", observed,
                                 f"< {limit} pages")


@parameters
class RowRemapParams(Params):
    rma_uncorrectable_rows: int = param(
        512, ge=1, doc="uncorrectable row remaps at which a GPU goes to RMA. DCGM: >= 512 "
        "fail; AzNHC: uncorr > 512 (check_gpu_ecc). Ampere+ supports up to 512 remaps for "
        "the frame buffer (a100-gpu-mem-error-mgmt)")
    max_banks_without_spares: int | None = param(
        0, ge=0, doc="memory banks with no spare row left (remapper histogram 'none') a "
        "GPU may have: the next uncorrectable error there cannot be remapped, which sets "
        "the failure flag; null: not judged")


@check("gpu.row_remap", needs=("nvml",), params=RowRemapParams,
       remedy="Pending remap: drain and reset the GPU (`nvidia-smi -r -i N`) or reboot to "
              "apply it. A remapping failure, the remap limit, exhausted banks, the "
              "unrepairable-memory flag or the SRAM error threshold: run the field "
              "diagnostic, collect nvidia-bug-report.sh and open an RMA case (NVIDIA's RMA "
              "criterion).",
       actions=(Action.RESET_GPU, Action.RMA))
def row_remap(ctx: CheckContext) -> Iterator[Finding]:
    """Memory repair (Ampere+ row remapping): nothing pending, no failure, spares left.

    Pending -> reset the GPU (the remap takes effect at reset). The failure flag, the
    remap limit, banks without spare rows, and the Hopper+ flags for unrepairable memory
    and the SRAM uncorrectable-error RMA threshold (NVML's bThresholdExceeded) -> RMA. NVML does
    not report remapping while MIG is enabled: skip.
    """
    gpus, skips = answering_gpus(ctx)
    yield from skips
    params = RowRemapParams.of(ctx)
    rows_limit, banks_limit = params.rma_uncorrectable_rows, params.max_banks_without_spares
    keys = ("remap_pending", "remap_failure", "remapped_uncorrected", FIELDS)
    for gpu in gpus:
        comp = gpu_component(gpu)
        pending, failure = gpu.remap_pending, gpu.remap_failure
        unc, hist = gpu.remapped_uncorrected, gpu.remap_histogram
        sram = bool(gpu.sram_threshold_exceeded)
        if sram:
            yield Finding.fail(comp, "SRAM uncorrectable error threshold exceeded", True,
                               False, Action.RMA)
        if pending is None and failure is None and unc is None:
            if sram:
                continue
            if gpu.mig_enabled:
                yield Finding.skip(comp, "row remapping not reported while MIG is enabled",
                                   gpu.unsupported.get("remap_pending"))
            else:
                yield missing(gpu, "row remapping", *keys)
            continue
        observed = {"corrected": gpu.remapped_corrected, "uncorrected": unc,
                    "pending": pending, "failure": failure,
                    "banks_without_spares": hist.get("none") if hist else None}
        problems = [
            (bool(pending), "row remap pending: reset the GPU", "no pending remap",
             Action.RESET_GPU),
            (bool(failure), "row remapping failed", "no failure", Action.RMA),
            (unc is not None and unc >= rows_limit, "uncorrectable row remaps at the RMA limit",
             f"< {rows_limit}", Action.RMA),
            (hist is not None and banks_limit is not None
             and hist.get("none", 0) > banks_limit, "memory banks without spare rows",
             f"<= {banks_limit}", Action.RMA),
            (bool(gpu.unrepairable_memory), "GPU reports unrepairable memory", "repairable",
             Action.RMA),
        ]
        for hit, message, expected, action in problems:
            if hit:
                yield Finding.fail(comp, message, observed, expected, action)
        bad = sram or any(hit for hit, *_ in problems)
        if not bad:
            yield Finding.passed(comp, "row remapping healthy", observed)


_SIZE_IN_NAME = r"(\d+)\s*GB\b"


@parameters
class MemorySizeParams(Params):
    expected_gib: float | None = param(
        None, ge=0, doc="each GPU's memory in GiB; null: the size in the model name, else "
        "the profile's gpu_memory_gib")
    tolerance_pct: float = param(
        5.0, ge=0, le=100, doc="how far the size may be off, in percent: NVML's total is a "
        "little under the marketed size (H100 80GB: 81559 MiB = 79.6 GiB; H200: 143771 "
        "MiB = 140.4 GiB in nvidia-smi -q captures)")


@check("gpu.memory_size", needs=("nvml",), params=MemorySizeParams,
       remedy="Less memory than the model has: a GPU of the profile's model reporting less "
              "memory has lost capacity (Xid 168) and goes to RMA; otherwise check that "
              "the node runs the GPUs its profile says.",
       actions=(Action.RMA, Action.INVESTIGATE, Action.FIX_CONFIG))
def memory_size(ctx: CheckContext) -> Iterator[Finding]:
    """Each GPU's memory is the expected size, within ``tolerance_pct``."""
    gpus, skips = answering_gpus(ctx)
    yield from skips
    tolerance = MemorySizeParams.of(ctx).tolerance_pct / 100
    for gpu in gpus:
        comp = gpu_component(gpu)
        expected = _expected_gib(ctx, gpu)
        if gpu.memory_total_bytes is None:
            yield missing(gpu, "memory size", "memory_total_bytes")
            continue
        if expected is None:
            yield Finding.skip(comp, "no expected memory size (profile, model name or "
                                     "config)", round(gpu.memory_total_bytes / GIB, 1))
            continue
        gib = round(gpu.memory_total_bytes / GIB, 1)
        if gib < expected * (1 - tolerance):
            known_model = gpu.name is not None and gpu.name in ctx.profile.gpu_models
            yield Finding.fail(comp, "less GPU memory than expected", gib, f"{expected} GiB",
                               Action.RMA if known_model else Action.INVESTIGATE)
        elif gib > expected * (1 + tolerance):
            yield Finding.warn(comp, "more GPU memory than expected", gib, f"{expected} GiB",
                               Action.FIX_CONFIG)
        else:
            yield Finding.passed(comp, "GPU memory size as expected", gib, f"{expected} GiB")


def _expected_gib(ctx: CheckContext, gpu: Gpu) -> float | None:
    expected = MemorySizeParams.of(ctx).expected_gib
    if expected is not None:
        return expected
    if gpu.name and gpu.name in ctx.profile.gpu_models:
        m = re.search(_SIZE_IN_NAME, gpu.name)  # "NVIDIA A100-SXM4-40GB" in an 80 GB profile
        if m:
            return float(m[1])
    return float(ctx.profile.gpu_memory_gib) if ctx.profile.gpu_memory_gib else None
