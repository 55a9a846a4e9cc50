"""InfiniBand error and congestion counters judged as rates between two samples.

Rules (from public practice): one ``link_downed`` on an ACTIVE port warns, two
within an hour (or one on a port that is no longer ACTIVE) fail; a growing
``link_error_recovery`` warns, five within an hour fail (the agent counts both over its
last hour, checks/core/window.py, not just the last interval); the physical-error counters
have per-minute warn/fail
thresholds. A per-minute threshold needs a minute of history to be judged as a rate
(the daemon provides it); over a shorter one-shot window only a count that alone reaches
the threshold is judged, since those events all fell within one minute. Fewer than
``min_events`` events are never a verdict. A counter pinned at its maximum (IBA
PortCounters saturate, they do not wrap) is reported as saturated: its rate is unknown,
not zero.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ...agent.model import Snapshot
from ...agent.model.ib import IbDevice, IbPort
from ..core.finding import Action, Finding, Status
from ..core.params import Params, param, parameters
from ..core.rates import DEFAULT_MIN_EVENTS, MIN_EVENTS_DOC, Rate, counter_rate, sample_interval
from ..core.registry import CheckContext, check
from ..core.validation import IB_PORT
from ..core.window import IB_WINDOW_COUNTERS, window_base
from .helpers import NODE, no_compute, port_component

_PER_MIN = ("symbol_error", "port_rcv_errors", "port_rcv_remote_physical_errors",
            "local_link_integrity_errors", "excessive_buffer_overrun_errors")
_ERROR_COUNTERS = ("link_downed", "link_error_recovery", *_PER_MIN)
_CONGESTION = ("port_xmit_wait", "port_xmit_discards")


def _previous_port(previous: Snapshot, dev: IbDevice, port: IbPort) -> IbPort | None:
    for old in previous.infiniband or []:
        if old.name == dev.name:
            return next((p for p in old.ports if p.port == port.port), None)
    return None


def _pairs(ctx: CheckContext) -> Iterator[tuple[IbDevice, IbPort, IbPort | None]]:
    previous = ctx.previous
    for dev in ctx.snapshot.infiniband or []:
        if dev.role != "compute":
            continue
        for port in dev.ports:
            old = _previous_port(previous, dev, port) if previous is not None else None
            yield dev, port, old


def over_per_min(rate: Rate, limit: float, min_events: int) -> bool:
    """Over a per-minute limit: as a rate over >= 60 s, else by the count alone."""
    if not rate.judged(min_events):
        return False
    if rate.seconds >= 60.0:
        return rate.per_min > limit
    return rate.events > limit


def _judge(name: str, rate: Rate, port: IbPort, params: IbErrorRateParams
           ) -> tuple[Status, str, Any] | None:
    """(status, message, expected) for one error counter; None when within limits."""
    min_events = params.min_events
    if name == "link_downed":
        hours = max(rate.seconds / 3600.0, 1.0)
        fail_events = params.link_downed_fail_per_hour * hours
        if rate.events and (rate.events >= fail_events or port.state != "ACTIVE"):
            return Status.FAIL, "link went down repeatedly", f"< {fail_events:g} per hour"
        if rate.events:
            return Status.WARN, "link went down and recovered", "0"
        return None
    if name == "link_error_recovery":
        hours = max(rate.seconds / 3600.0, 1.0)
        fail_events = params.link_error_recovery_fail_per_hour * hours
        if rate.events >= fail_events:
            return Status.FAIL, "link keeps recovering from errors (flapping)", \
                f"< {fail_events:g} per hour"
        return (Status.WARN, "link error recovery increasing", "0") if rate.events else None
    limits: tuple[float | None, ...] | None = getattr(params, f"{name}_per_min", None)
    if not limits:
        return None
    warn, fail = limits
    if fail is not None and over_per_min(rate, fail, min_events):
        return Status.FAIL, f"{name} increasing", f"<= {fail:g}/min"
    if warn is not None and over_per_min(rate, warn, min_events):
        return Status.WARN, f"{name} increasing", f"<= {warn:g}/min"
    return None


# port_xmit_wait is a 32-bit PortCounters field that counts ticks of tens of nanoseconds:
# a busy, healthy link fills it (a real H100 node read 2,489,603,687, over half its range), so
# there its saturation is the normal state, not a warning; the error counters saturating
# still warns, since they only grow when something is wrong.
ROUTINE_SATURATION = frozenset({"port_xmit_wait"})


def _windows(ctx: CheckContext) -> dict[tuple[str, str], Rate]:
    """(port component, counter) -> growth over the agent's long window (checks/core/window.py)
    for the link-flap counters; empty without a usable window (one-shot runs)."""
    base = window_base(ctx)
    if base is None:
        return {}
    windows = {}
    for dev in ctx.snapshot.infiniband or []:
        for port in dev.ports:
            comp = port_component(dev, port)
            for name in IB_WINDOW_COUNTERS:
                rate = base.rate(comp, name, port.counters.get(name))
                if rate is not None:
                    windows[(comp, name)] = rate
    return windows


def _saturated(comp: str, name: str, old: IbPort, port: IbPort, dt: float, judge: Any,
               params: Params, action: Action) -> Finding:
    """A counter pinned at its maximum: the growth up to it is a lower bound on the
    events (a 4-bit counter that went from 0 to 15 in 30 s counted at least 15). When that
    bound already breaks a limit it is the verdict; otherwise the rate is unknown."""
    rate = counter_rate(old.counters.get(name), port.counters.get(name), dt)
    verdict = judge(name, rate, port, params) if rate is not None and rate.events else None
    if verdict is not None and rate is not None:
        status, message, expected = verdict
        return Finding(status, comp, f"{message} (at least: the counter saturated)",
                       {"counter": name, **rate.to_dict(), "lower_bound": True}, expected,
                       action)
    return Finding.warn(comp, f"{name} saturated at its maximum: rate unknown, reset the "
                              "counters", port.counters.get(name), "below the counter's maximum")


def _rates(ctx: CheckContext, names: tuple[str, ...], action: Action,
           judge: Any) -> Iterator[Finding]:
    """Shared walk of both rate checks: saturation first, then each counter's rate."""
    params = ctx.params
    if ctx.previous is None:
        yield Finding.skip(NODE, "no earlier sample to compare InfiniBand counters with")
        return
    dt = sample_interval(ctx.previous, ctx.snapshot)
    if dt is None:
        yield Finding.error(NODE, "samples out of order: cannot compute rates")
        return
    judged = False
    for dev, port, old in _pairs(ctx):
        comp = port_component(dev, port)
        judged = True
        if old is None:
            yield Finding.skip(comp, "port not in the earlier sample")
            continue
        bad = False
        routine = []
        for name in names:
            if name in port.saturated and name in ROUTINE_SATURATION:
                routine.append(name)
                continue
            if name in port.saturated:
                bad = True
                yield _saturated(comp, name, old, port, dt, judge, params, action)
                continue
            if f"counters/{name}" in port.unknown:
                bad = True
                yield Finding(Status.ERROR, comp, f"{name} unknown",
                              observed=port.unknown[f"counters/{name}"],
                              action=Action.INVESTIGATE)
                continue
            rate = counter_rate(old.counters.get(name), port.counters.get(name), dt)
            verdict = judge(name, rate, port, params) if rate is not None else None
            if verdict is not None and rate is not None:
                bad = True
                status, message, expected = verdict
                yield Finding(status, comp, message, {"counter": name, **rate.to_dict()},
                              expected, action)
        if not bad:
            note = f"; {', '.join(routine)} at its 32-bit maximum, rate unknown" if routine \
                else ""
            yield Finding.passed(comp, "counters within limits", f"{len(names)} counters over "
                                                                  f"{round(dt, 1)} s{note}")
    if not judged:
        yield no_compute(ctx)


@parameters
class IbErrorRateParams(Params):
    min_events: int = param(DEFAULT_MIN_EVENTS, ge=1, doc=MIN_EVENTS_DOC)
    link_downed_fail_per_hour: int = param(
        2, ge=1, doc="link downs an hour that fail a port (fewer warn)")
    link_error_recovery_fail_per_hour: int = param(
        5, ge=1, doc="link error recoveries (the link retrained without going down) an hour "
        "that fail a port, fewer warn: AzNHC's check_ib_link_flapping fails at 5 flaps "
        "(azurehpc-health-checks; it counts over 24 h, the agent over its last hour, "
        "one-shot runs over their interval)")
    symbol_error_per_min: tuple[float | None, ...] = param(
        (10.0, 100.0), ge=0, length=2, doc="[warn, fail] symbol errors a minute; null disables "
        "one side")
    port_rcv_errors_per_min: tuple[float | None, ...] = param(
        (10.0, 100.0), ge=0, length=2, doc="[warn, fail] receive errors a minute; null "
        "disables one side")
    port_rcv_remote_physical_errors_per_min: tuple[float | None, ...] = param(
        (10.0, 100.0), ge=0, length=2, doc="[warn, fail] remote physical receive errors a "
        "minute; null disables one side")
    local_link_integrity_errors_per_min: tuple[float | None, ...] = param(
        (3.0, 10.0), ge=0, length=2, doc="[warn, fail] local link integrity errors a minute; "
        "null disables one side")
    excessive_buffer_overrun_errors_per_min: tuple[float | None, ...] = param(
        (3.0, 10.0), ge=0, length=2, doc="[warn, fail] excessive buffer overruns a minute; "
        "null disables one side")


@check("ib.error_rate", validation=IB_PORT, needs=("infiniband",), rate=True,
       params=IbErrorRateParams,
       remedy="Physical errors on a compute port (symbol, receive, integrity errors, link "
              "downs) are nearly always the cable or transceiver: reseat it, swap it, then "
              "the switch port. A saturated counter hides its rate: reset the counters "
              "(perfquery -x -R) and check again.",
       actions=(Action.RESEAT_CABLE, Action.INVESTIGATE))
def error_rate(ctx: CheckContext) -> Iterator[Finding]:
    """Compute ports' error counters grow slower than their limits (see module doc).

    In the agent, ``link_downed`` and ``link_error_recovery`` are judged over its last
    hour (checks/core/window.py), so flaps minutes apart add up."""
    windows = _windows(ctx)
    names = {id(port): port_component(dev, port)
             for dev in ctx.snapshot.infiniband or [] for port in dev.ports}

    def judge(name: str, rate: Rate, port: IbPort, params: IbErrorRateParams
              ) -> tuple[Status, str, Any] | None:
        window = windows.get((names.get(id(port), ""), name))
        return _judge(name, window if window is not None else rate, port, params)

    for finding in _rates(ctx, _ERROR_COUNTERS, Action.RESEAT_CABLE, judge):
        counter = finding.observed.get("counter") if isinstance(finding.observed, dict) \
            else None
        window = windows.get((finding.component, str(counter)))
        if window is not None and not finding.observed.get("lower_bound"):
            finding = finding.replace(observed={"counter": counter, **window.to_dict(),
                                               "window": "agent"})
        yield finding


def _judge_congestion(name: str, rate: Rate, port: IbPort, params: CongestionParams
                      ) -> tuple[Status, str, Any] | None:
    min_events = params.min_events
    if name == "port_xmit_wait":
        limit = params.xmit_wait_warn_per_s
        if limit is not None and rate.over_per_s(limit, min_events):
            return Status.WARN, "port waiting for credits (congestion)", f"<= {limit}/s"
        return None
    discards = params.xmit_discards_warn_per_min
    if discards is not None and over_per_min(rate, discards, min_events):
        return Status.WARN, "port discarding packets", f"<= {discards:g}/min"
    return None


@parameters
class CongestionParams(Params):
    min_events: int = param(DEFAULT_MIN_EVENTS, ge=1, doc=MIN_EVENTS_DOC)
    xmit_wait_warn_per_s: float | None = param(
        1.0e6, ge=0, doc="port_xmit_wait ticks a second above which a port warns: it counts "
        "ticks with data to send and no credit; the tick is device-specific (tens of ns), "
        "so millions per second mean the port stalled for a large share of the time. Tune "
        "per site; null: not judged")
    xmit_discards_warn_per_min: float | None = param(
        100.0, ge=0, doc="discarded packets a minute above which a port warns; null: not "
        "judged")


@check("ib.congestion", needs=("infiniband",), rate=True, params=CongestionParams,
       remedy="Congestion is a fabric property: look at the switch ports and the other "
              "rails (ibdiagnet, UFM congestion maps), adaptive routing and the job's "
              "traffic pattern before suspecting this node.",
       actions=(Action.INVESTIGATE,))
def congestion(ctx: CheckContext) -> Iterator[Finding]:
    """Compute ports do not wait for credits or discard packets at a high rate."""
    yield from _rates(ctx, _CONGESTION, Action.INVESTIGATE, _judge_congestion)


# -- ib.transport_errors ------------------------------------------------------------------

# The mlx5 transport (queue-pair) counters in hw_counters/ (kernel mlx5/counters.c), judged as
# rates: a [warn, fail] limit per minute each, ``None`` for a side not judged. Sources:
# - rnr_nak_retry_err (a QP exhausted its RNR retries and went to error: a connection of
#   the job broke): NVSentinel's nic-health-monitor calls any increase fatal (its
#   docs/nic-health-monitor); here any increase of ``min_events`` or more fails.
# - local_ack_timeout_err (the requester waited out an ACK: lost packets or a dead peer;
#   each costs NCCL_IB_TIMEOUT, ~4 s at the default 20): NVSentinel's non-fatal limit,
#   1/s, warns.
# - packet_seq_err, implied_nak_seq_err (NAKs for packets the responder never received:
#   loss in the fabric): no peer publishes a limit; the same 1/s as ACK timeouts, since
#   each loss is followed by a retransmission, warns.
# - req_cqe_error, resp_cqe_error (work completions in error on this node: a QP moved to
#   the error state): no peer limit; NCCL aborts on the first one, so any increase of
#   ``min_events`` or more warns (the application may be the cause: bad memory keys).
# - out_of_buffer, out_of_sequence, duplicate_request (receiver without posted buffers,
#   reordering, retransmitted requests): no peer limit; NVSentinel's 10/s for
#   roce_slow_restart, the closest congestion-class counter it judges, warns.
# - roce_slow_restart: NVSentinel's non-fatal limit, 10/s, warns.
# Not judged: *_flush_error (normal in bursts when QPs are torn down), the remote
# access/length errors (the application's own bugs), rx_* request counts (traffic).
TRANSPORT_LIMITS: dict[str, tuple[float | None, float | None]] = {
    "rnr_nak_retry_err": (None, 0.0),
    "local_ack_timeout_err": (60.0, None),
    "packet_seq_err": (60.0, None),
    "implied_nak_seq_err": (60.0, None),
    "req_cqe_error": (0.0, None),
    "resp_cqe_error": (0.0, None),
    "out_of_buffer": (600.0, None),
    "out_of_sequence": (600.0, None),
    "duplicate_request": (600.0, None),
    "roce_slow_restart": (600.0, None),
}


def _transport_findings(comp: str, port: IbPort, old: IbPort, dt: float,
                        params: TransportParams) -> Iterator[Finding]:
    limits, min_events = params.limits, params.min_events
    judged, bad = 0, False
    for name in sorted(limits):
        rate = counter_rate(old.hw_counters.get(name), port.hw_counters.get(name), dt)
        if rate is None:
            continue
        judged += 1
        warn, fail = limits[name]
        observed = {"counter": name, **rate.to_dict()}
        if fail is not None and over_per_min(rate, fail, min_events):
            bad = True
            yield Finding.fail(comp, f"{name} increasing", observed, f"<= {fail:g}/min",
                               Action.INVESTIGATE)
        elif warn is not None and over_per_min(rate, warn, min_events):
            bad = True
            yield Finding.warn(comp, f"{name} increasing", observed, f"<= {warn:g}/min",
                               Action.INVESTIGATE)
    if bad:
        return
    if judged:
        yield Finding.passed(comp, "transport counters within limits",
                             f"{judged} counters over {round(dt, 1)} s")
    else:
        yield Finding.skip(comp, "no transport counters (hw_counters) in both samples")


@parameters
class TransportParams(Params):
    min_events: int = param(DEFAULT_MIN_EVENTS, ge=1, doc=MIN_EVENTS_DOC)
    limits: Mapping[str, tuple[float | None, ...]] = param(
        TRANSPORT_LIMITS, ge=0, length=2, doc="mlx5 transport counter (hw_counters) -> "
        "[warn, fail] a minute, null for a side not judged; a counter not named is not "
        "judged")


@check("ib.transport_errors", needs=("infiniband",), rate=True, params=TransportParams,
       remedy="Transport errors are the fabric losing packets or a peer not answering: an "
              "RNR retry or ACK timeout exceeded breaks a NCCL connection. Look at this "
              "port's physical counters (ib.error_rate) and its cable, then at the switch "
              "ports and the peers it talks to (ibdiagnet); completion errors with healthy "
              "links point at the application (memory registration, keys).",
       actions=(Action.INVESTIGATE,))
def transport_errors(ctx: CheckContext) -> Iterator[Finding]:
    """Compute ports' mlx5 transport counters grow slower than their limits.

    The counters are 32-bit and wrap (the kernel's mlx5/counters.c): a value that went backwards
    counts what it shows since, a lower bound (rates.py). A per-minute limit is judged as
    a rate over a minute or more, else by the count alone (``over_per_min``), and never
    on fewer than ``min_events`` events.
    """
    if ctx.previous is None:
        yield Finding.skip(NODE, "no earlier sample to compare transport counters with")
        return
    dt = sample_interval(ctx.previous, ctx.snapshot)
    if dt is None:
        yield Finding.error(NODE, "samples out of order: cannot compute rates")
        return
    judged = False
    for dev, port, old in _pairs(ctx):
        judged = True
        comp = port_component(dev, port)
        if old is None:
            yield Finding.skip(comp, "port not in the earlier sample")
        else:
            yield from _transport_findings(comp, port, old, dt, TransportParams.of(ctx))
    if not judged:
        yield no_compute(ctx)
