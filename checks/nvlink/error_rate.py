"""nvlink.error_rate: how fast each link's error counters grow between two samples."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..core.common import gpu_component, previous_gpu, rate_interval
from ..core.finding import Action, Finding, Status
from ..core.params import Params, param, parameters
from ..core.rates import DEFAULT_MIN_EVENTS, counter_rate
from ..core.registry import CheckContext, check
from ..core.validation import NVLINK
from ..core.window import NVLINK_WINDOW_COUNTERS, window_base
from .helpers import nvlink_gpus

# How each generation's counters are judged (names as the NVML collector stores them),
# and by which of ErrorRateParams' fields.
# kind "events": fail on an increase of at least the threshold and of at least
# ``min_events``; kind "failed": fail on an increase of at least the threshold, no
# ``min_events``; kind "crc": DCGM's CRC rule (from ``min_events`` on: fail at the rate,
# warn below it); kind "warn_rate": warn when the rate passes the threshold.
_COUNTER_RULES: dict[str, tuple[str, str]] = {
    # pre-Blackwell DL counters (NVML fields 161-163)
    "replay": ("events", "replay_fail_events"),
    "recovery": ("events", "recovery_fail_events"),
    "crc": ("crc", "crc_fail_per_s"),
    # NVLink5 (fields 208, 211, 214, 215, 221)
    "recovery_failed": ("failed", "recovery_failed_fail_events"),
    "rcv_errors": ("crc", "rcv_errors_fail_per_s"),
    "local_link_integrity": ("warn_rate", "local_link_integrity_warn_per_s"),
    "symbol_errors": ("warn_rate", "symbol_errors_warn_per_s"),
}

_COUNTER_TEXT = {
    "replay": "NVLink replay errors",
    "recovery": "NVLink recoveries",
    "crc": "NVLink CRC errors",
    "recovery_failed": "NVLink failed recoveries",
    "rcv_errors": "NVLink receive errors",
    "local_link_integrity": "NVLink local link integrity errors",
    "symbol_errors": "NVLink symbol errors",
}


@parameters
class ErrorRateParams(Params):
    min_events: int = param(
        DEFAULT_MIN_EVENTS, ge=1, doc="an increase smaller than this is not a verdict: "
        "one stray count in a short window is noise, whatever the counter")
    replay_fail_events: int = param(
        1, ge=1, doc="replays that fail a link (DCGM health watch, "
        "DCGM_LIMIT_MAX_NVLINK_ERROR: any increase in the window fails)")
    recovery_fail_events: int = param(
        1, ge=1, doc="recoveries that fail a link (DCGM_LIMIT_MAX_NVLINK_ERROR)")
    crc_fail_per_s: float = param(
        100.0, ge=0, doc="CRC errors a second at which a link fails; below it, from "
        "min_events on, it warns (DCGM_LIMIT_MAX_NVLINK_CRC_ERROR)")
    recovery_failed_fail_events: int = param(
        1, ge=1, doc="NVLink5 failed recoveries that fail a link: a failed recovery is a "
        "link that went down; min_events does not apply")
    rcv_errors_fail_per_s: float = param(
        100.0, ge=0, doc="NVLink5 receive errors (packets that failed their CRC after FEC) "
        "a second at which a link fails, warning below: DCGM's CRC rule")
    local_link_integrity_warn_per_s: float = param(
        0.0, ge=0, doc="NVLink5 local link integrity errors a second above which a link "
        "warns")
    symbol_errors_warn_per_s: float | None = param(
        None, ge=0, doc="pre-FEC symbol errors a second above which a link warns; null: "
        "not judged (expected on PAM4 links and judged by BER, which the snapshot does "
        "not carry)")


@check("nvlink.error_rate", validation=NVLINK, needs=("nvml",), rate=True, params=ErrorRateParams,
       remedy="A link whose error counters keep growing is marginal. Reset the GPU to "
              "retrain its links and watch the counters (nvidia-smi nvlink -e). Errors that "
              "come back after a reset are hardware: on NVL72 trays reseat the tray's "
              "NVLink connections (cable cartridge); otherwise run the field diagnostics "
              "and open an RMA.",
       actions=(Action.RESET_GPU, Action.INVESTIGATE))
def error_rate(ctx: CheckContext) -> Iterator[Finding]:
    """NVLink error counters grow slowly enough, per link and per generation's counters.

    Counters only grow, so the check compares two samples (``--level full``, or the
    daemon's previous one) and judges the increase. Hopper and earlier: replay and
    recovery increases fail (DCGM's health watch), CRC errors fail at 100/s and warn
    below. Blackwell drops those counters (nvml.h: "unsupported for Blackwell+") for its
    own: a failed recovery fails at once, recoveries fail like Hopper's, receive errors
    follow the CRC rule, local-integrity errors warn, symbol errors (pre-FEC, normal on
    PAM4 links) are judged only with a configured rate. Apart from failed recoveries, an
    increase below ``min_events`` is not a verdict. A counter that went down was reset
    (GPU reset, driver reload): what it counted since is a lower bound (rates.py). In the
    agent, replays, recoveries and failed recoveries are judged over its last hour
    (checks/core/window.py), so a trickle of one every few minutes adds up to a verdict.
    The counters are judged whatever profile was detected, ``generic`` included: they
    are compared with their own earlier values, never with an expectation.
    """
    findings, judged = nvlink_gpus(ctx, by_profile=False)
    yield from findings
    if not judged:
        return
    previous = ctx.previous
    dt = rate_interval(previous, ctx.snapshot, "NVLink counters")
    if isinstance(dt, Finding):
        yield dt
        return
    params = ErrorRateParams.of(ctx)
    base = window_base(ctx)
    for gpu in judged:
        component = gpu_component(gpu)
        old = previous_gpu(previous, gpu)
        if old is None:
            yield Finding.skip(component, "GPU not in the earlier sample")
            continue
        old_links = {link.link: link for link in old.nvlinks}
        judged_counters = 0
        bad = False
        for link in gpu.nvlinks:
            before = old_links.get(link.link)
            if before is None:
                continue
            where = f"{component}.link{link.link}"
            for name, value in sorted(link.errors.items()):
                rule = _COUNTER_RULES.get(name)
                prev_value, seconds = before.errors.get(name), dt
                if rule is None or prev_value is None:
                    continue
                start = base.counters.get(where, {}).get(name) if base is not None and \
                    name in NVLINK_WINDOW_COUNTERS else None
                if start is not None and base is not None:  # the agent's last hour
                    prev_value, seconds = start, base.seconds
                verdict = _judge_counter(name, rule, prev_value, value, seconds, params)
                if verdict is None:
                    continue
                judged_counters += 1
                status, observed, expected = verdict
                if status is Status.PASS:
                    continue
                bad = True
                text = f"{_COUNTER_TEXT[name]} increasing"
                if status is Status.FAIL:
                    yield Finding.fail(where, text, observed, expected, Action.RESET_GPU)
                else:
                    yield Finding.warn(where, text, observed, expected, Action.INVESTIGATE)
        if not bad:
            if judged_counters:
                yield Finding.passed(component, "NVLink error counters within limits",
                                     f"{judged_counters} counters over {round(dt, 1)} s")
            else:
                yield Finding.skip(component, "no NVLink error counters in both samples")


def _judge_counter(name: str, rule: tuple[str, str], prev: int, cur: int, dt: float,
                   params: ErrorRateParams) -> tuple[Status, dict[str, Any], str] | None:
    """(status, observed, expected) for one counter of one link; None when no verdict.

    A counter that went backwards was reset between the samples: the events since then
    (``cur``) are a lower bound, which never raises a false alarm (rates.py).
    """
    rate = counter_rate(prev, cur, dt)
    if rate is None:
        return None
    kind, key = rule
    threshold: float | None = getattr(params, key)
    min_events = params.min_events
    observed: dict[str, Any] = {"counter": name, **rate.to_dict(),
                                "per_s": round(rate.per_s, 3)}
    if threshold is None:
        return Status.PASS, observed, "not judged"
    if kind == "failed":
        failing = rate.events >= int(threshold)
        return (Status.FAIL if failing else Status.PASS), observed, f"< {threshold} events"
    if kind == "events":
        need = max(int(threshold), min_events)
        return (Status.FAIL if rate.events >= need else Status.PASS), observed, \
            f"< {need} events"
    if not rate.judged(min_events):
        return Status.PASS, observed, f"< {min_events} events"
    if kind == "crc":
        failing = rate.per_s >= float(threshold)
        return (Status.FAIL if failing else Status.WARN), observed, f"< {threshold}/s"
    failing = rate.over_per_s(float(threshold), min_events)
    return (Status.WARN if failing else Status.PASS), observed, f"<= {threshold}/s"
