"""What slows a GPU down: gpu.temperature, gpu.clock_events (slowdown reasons),
gpu.clocks (held or throttled clocks) and gpu.power_limit (a power cap)."""

from __future__ import annotations

from collections.abc import Iterator

from ...agent.model.gpu import Gpu
from ..core.common import gpu_component, previous_gpu
from ..core.finding import Action, Finding, Status
from ..core.params import Params, param, parameters
from ..core.rates import sample_interval
from ..core.registry import CheckContext, check
from ..core.validation import THERMAL_POWER
from .helpers import FIELDS, answering_gpus, missing


@parameters
class TemperatureParams(Params):
    min_slowdown_margin_c: int = param(
        5, ge=0, doc="degrees C under the slowdown temperature under which a GPU warns. "
        "gpud's slowdown-margin threshold is off by default; 5 C leaves room for the rise "
        "from idle to load before the GPU would start to slow itself down")
    max_memory_c: int | None = param(
        95, ge=0, doc="the HBM temperature (C) at which memory warns; null: not judged. "
        "HBM2e/HBM3 'Memory Max Operating Temp: 95 C' in nvidia-smi -q on A100/H100; gpud "
        "and DCGM compare HBM temperature with that limit")


@check("gpu.temperature", validation=THERMAL_POWER, needs=("nvml",), params=TemperatureParams,
       remedy="Check the node's cooling: fans and fan policy in the BMC, airflow and "
              "blanking panels, inlet temperature, liquid-cooling flow on DLC systems.",
       actions=(Action.INVESTIGATE,))
def temperature(ctx: CheckContext) -> Iterator[Finding]:
    """Margin between GPU temperature and its slowdown threshold; HBM temperature.

    At or over the slowdown temperature the GPU halves its clocks (fail); a margin under
    ``min_slowdown_margin_c`` warns. Memory at ``max_memory_c`` or above warns.
    """
    gpus, skips = answering_gpus(ctx)
    yield from skips
    params = TemperatureParams.of(ctx)
    min_margin, max_mem = params.min_slowdown_margin_c, params.max_memory_c
    for gpu in gpus:
        comp, temp, slow = gpu_component(gpu), gpu.temperature_c, gpu.slowdown_temperature_c
        if temp is None:
            yield missing(gpu, "GPU temperature", "temperature_c")
        elif slow is None:
            yield missing(gpu, "slowdown temperature threshold", "slowdown_temperature_c")
        else:
            observed = {"temperature_c": temp, "slowdown_c": slow, "margin_c": slow - temp}
            if temp >= slow:
                yield Finding.fail(comp, "GPU at or over its slowdown temperature", observed,
                                   f"< {slow} C", Action.INVESTIGATE)
            elif slow - temp < min_margin:
                yield Finding.warn(comp, "GPU close to its slowdown temperature", observed,
                                   f"margin >= {min_margin} C", Action.INVESTIGATE)
            else:
                yield Finding.passed(comp, "GPU temperature within limits", observed,
                                     f"margin >= {min_margin} C")
        mem = gpu.memory_temperature_c
        if mem is not None and max_mem is not None:
            if mem >= max_mem:
                yield Finding.warn(comp, "GPU memory (HBM) at its maximum temperature", mem,
                                   f"< {max_mem} C", Action.INVESTIGATE)
            else:
                yield Finding.passed(comp, "GPU memory temperature within limits", mem,
                                     f"< {max_mem} C")


# nvmlClocksEventReason* bits (nvml.h).
CLOCK_REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks", 0x4: "sw_power_cap",
                 0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
                 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
                 0x100: "display_clocks", 0x200: "board_limit", 0x400: "reliability"}
HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, POWER_BRAKE = 0x8, 0x20, 0x40, 0x80


def clock_reason_names(mask: int) -> list[str]:
    names = [name for bit, name in CLOCK_REASONS.items() if mask & bit]
    rest = mask & ~sum(CLOCK_REASONS)
    return names + ([f"0x{rest:x}"] if rest else [])


@check("gpu.clock_events", validation=THERMAL_POWER, needs=("nvml",),
       remedy="Hardware thermal slowdown: fix cooling. Power brake: the power supply or "
              "BMC asserted the external brake; check PSUs and the rack's power budget. "
              "Software thermal slowdown: cooling is marginal. A GPU slowed down this way "
              "makes every collective in the job wait for it.",
       actions=(Action.INVESTIGATE,))
def clock_events(ctx: CheckContext) -> Iterator[Finding]:
    """No hardware slowdown (thermal, power brake) or software thermal slowdown is active.

    HW thermal slowdown (0x40) and power brake (0x80) fail: clocks are cut by half or
    more, and the GPU becomes the job's straggler. HW slowdown (0x8) alone warns, since
    NVML also reports it briefly during P-state changes, and fails when the previous
    sample showed it too (sustained). SW thermal (0x20) warns. Idle, application clocks,
    the software power cap and sync boost are normal operation.
    """
    gpus, skips = answering_gpus(ctx)
    yield from skips
    for gpu in gpus:
        comp, mask = gpu_component(gpu), gpu.clock_event_reasons
        if mask is None:
            yield missing(gpu, "clock event reasons", "clock_event_reasons")
            continue
        observed = {"mask": f"0x{mask:x}", "reasons": clock_reason_names(mask)}
        prev = previous_gpu(ctx.previous, gpu)
        sustained = bool(prev and prev.clock_event_reasons is not None
                         and prev.clock_event_reasons & HW_SLOWDOWN)
        if mask & POWER_BRAKE:
            yield Finding.fail(comp, "hardware power brake slowdown active", observed,
                               "no power brake", Action.INVESTIGATE)
        if mask & HW_THERMAL:
            yield Finding.fail(comp, "hardware thermal slowdown active", observed,
                               "no thermal slowdown", Action.INVESTIGATE)
        if mask & HW_SLOWDOWN and not mask & (POWER_BRAKE | HW_THERMAL):
            if sustained:
                yield Finding.fail(comp, "hardware slowdown active in consecutive samples",
                                   observed, "no hardware slowdown", Action.INVESTIGATE)
            else:
                yield Finding.warn(comp, "hardware slowdown active", observed,
                                   "no hardware slowdown", Action.INVESTIGATE)
        if mask & SW_THERMAL:
            yield Finding.warn(comp, "software thermal slowdown active", observed,
                               "no thermal slowdown", Action.INVESTIGATE)
        if not mask & (POWER_BRAKE | HW_THERMAL | HW_SLOWDOWN | SW_THERMAL):
            yield Finding.passed(comp, "no hardware or thermal slowdown", observed)


APPLICATION_CLOCKS = 0x2  # nvmlClocksEventReasonApplicationsClocksSetting (UserDefinedClocks)


@parameters
class ClocksParams(Params):
    below_max_pct: float = param(
        5.0, ge=0, le=100, doc="percent under the maximum an SM clock held by the "
        "application/locked-clock reason warns at, and under the profile's sm_clock_mhz "
        "an applications clock does: a clock someone capped (nvidia-smi -lgc/-ac); the "
        "margin leaves room for boost steps (15 MHz bins) near the top")
    max_slowdown_share: float = param(
        0.05, ge=0, le=1, doc="share of the time between two samples a GPU may spend in "
        "thermal or power-brake slowdown (fields 269-271). No peer publishes a time-share "
        "limit; for scale, gpud's hw-slowdown component calls a GPU unhealthy at 0.6 "
        "slowdown events a minute over 10 minutes")


@check("gpu.clocks", needs=("nvml",), params=ClocksParams,
       remedy="A GPU slower than its peers holds back every collective of the job. Locked "
              "or application clocks: reset them (`nvidia-smi -rgc`, `nvidia-smi -rac`) or "
              "find the script or policy that sets them. Time spent in thermal slowdown "
              "or power braking: check cooling, the PSUs and the BMC's power policy, as for "
              "gpu.clock_events.",
       actions=(Action.FIX_CONFIG, Action.INVESTIGATE))
def clocks(ctx: CheckContext) -> Iterator[Finding]:
    """Stragglers: an SM clock held below its maximum by an application or locked-clock
    setting, and slowdown time that grows between samples.

    The first needs one sample: the ApplicationsClocksSetting reason (0x2) active with the
    SM clock more than ``below_max_pct`` under the maximum (an idle GPU drops its clock
    with the reason clear, and is not judged); and, where the profile knows the SM clock
    its GPUs run uncapped (``sm_clock_mhz``), an applications clock set more than
    ``below_max_pct`` under it, which an idle GPU shows too (nvmlDeviceGetApplicationsClock,
    https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html: the clock
    applications will use, changed by nvmlDeviceSetApplicationsClocks; drivers from 590
    answer Deprecated, and then only the reason is judged). The second needs an earlier
    sample: the thermal and power-brake slowdown time (ns) grown by more than
    ``max_slowdown_share`` of the interval, however briefly each episode lasted. All
    warn: the GPU works, slowly.
    """
    gpus, skips = answering_gpus(ctx)
    yield from skips
    dt = sample_interval(ctx.previous, ctx.snapshot)
    params = ClocksParams.of(ctx)
    for gpu in gpus:
        comp = gpu_component(gpu)
        found = list(_held_clock(gpu, params.below_max_pct))
        found += _low_app_clock(gpu, ctx.profile.sm_clock_mhz, params.below_max_pct)
        prev = previous_gpu(ctx.previous, gpu)
        if dt is not None and prev is not None:
            found += _slowdown_time(gpu, prev, dt, params.max_slowdown_share)
        if any(f.status is not Status.PASS for f in found):
            yield from (f for f in found if f.status is not Status.PASS)
        elif gpu.sm_clock_mhz is None or gpu.sm_clock_max_mhz is None:
            yield missing(gpu, "SM clock", "sm_clock_mhz", "sm_clock_max_mhz")
        else:
            yield Finding.passed(comp, "SM clock not held below its maximum",
                                 {"sm_clock_mhz": gpu.sm_clock_mhz,
                                  "max_mhz": gpu.sm_clock_max_mhz})


def _held_clock(gpu: Gpu, below_max_pct: float) -> Iterator[Finding]:
    mask, cur, top = gpu.clock_event_reasons, gpu.sm_clock_mhz, gpu.sm_clock_max_mhz
    if mask is None or cur is None or not top or not mask & APPLICATION_CLOCKS:
        return
    if cur < top * (1 - below_max_pct / 100):
        yield Finding.warn(gpu_component(gpu), "SM clock held below its maximum by an "
                           "application or locked-clock setting",
                           {"sm_clock_mhz": cur, "max_mhz": top,
                            "reasons": clock_reason_names(mask)},
                           f">= {top * (1 - below_max_pct / 100):.0f} MHz", Action.FIX_CONFIG)


def _low_app_clock(gpu: Gpu, expected: int | None, below_pct: float) -> Iterator[Finding]:
    """A warn where the applications clock is set below the profile's SM clock.

    The current clock only shows a cap under load; the applications clock is the setting
    itself, so a GPU capped by ``nvidia-smi -ac`` is found before the job it slows. A
    warn, never a fail: the GPU works, slowly, and a site may cap clocks on purpose.
    """
    app = gpu.sm_app_clock_mhz
    if app is None or not expected:
        return
    floor = expected * (1 - below_pct / 100)
    if app < floor:
        yield Finding.warn(gpu_component(gpu), f"GPU {gpu.index} applications clock set to "
                           f"{app} MHz, below the profile's SM clock {expected} MHz",
                           {"sm_app_clock_mhz": app, "profile_sm_clock_mhz": expected},
                           f">= {floor:.0f} MHz", Action.FIX_CONFIG)


def _slowdown_time(gpu: Gpu, prev: Gpu, dt: float, max_share: float) -> Iterator[Finding]:
    grown = {name: now - before for name, now in gpu.clock_event_time_ns.items()
             if (before := prev.clock_event_time_ns.get(name)) is not None and now >= before}
    share = sum(grown.values()) / (dt * 1e9)
    if grown and share > max_share:
        yield Finding.warn(gpu_component(gpu), "GPU spent time in thermal or power-brake "
                           "slowdown between samples",
                           {"slowdown_ns": {k: v for k, v in grown.items() if v},
                            "seconds": round(dt, 3), "share": round(share, 3)},
                           f"<= {max_share:g} of the time", Action.INVESTIGATE)


@parameters
class PowerLimitParams(Params):
    expected_w: float | None = param(
        None, ge=0, doc="the site's intended power limit in W; null: the profile's "
        "gpu_power_limit_w, else the GPU's default limit")
    tolerance_pct: float = param(
        5.0, ge=0, le=100, doc="allowed shortfall in percent: limits are set in whole "
        "watts and some boards enforce a few W under their nominal TDP")


@check("gpu.power_limit", needs=("nvml",), params=PowerLimitParams,
       remedy="Restore the power limit (`nvidia-smi -pl <W>` or remove the cap set by a "
              "script, the BMC or a DCGM policy) or set expected_w if the cap is intended.",
       actions=(Action.FIX_CONFIG,))
def power_limit(ctx: CheckContext) -> Iterator[Finding]:
    """The enforced power limit is not below the expected limit (power capped)."""
    gpus, skips = answering_gpus(ctx)
    yield from skips
    params = PowerLimitParams.of(ctx)
    tolerance = params.tolerance_pct
    for gpu in gpus:
        comp = gpu_component(gpu)
        limit = gpu.power_limit_w  # NVML field 190, the current (enforced) limit
        reference = params.expected_w or ctx.profile.gpu_power_limit_w \
            or gpu.power_default_limit_w
        if limit is None:
            yield missing(gpu, "power limit", "power_limit_w", FIELDS)
            continue
        if reference is None:
            yield missing(gpu, "default power limit", "power_default_limit_w", FIELDS)
            continue
        observed = {"limit_w": limit, "default_w": gpu.power_default_limit_w}
        floor = float(reference) * (1 - tolerance / 100)
        expected = f">= {float(reference):g} W"
        if limit < floor:
            yield Finding.warn(comp, "power capped below the expected limit", observed,
                               expected, Action.FIX_CONFIG)
        else:
            yield Finding.passed(comp, "power limit as expected", observed, expected)
