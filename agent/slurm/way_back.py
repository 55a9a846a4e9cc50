"""What the health check does for a node's way back, decided from Slurm's view of the node,
its lifecycle (agent/health/lifecycle.py) and whether a validation runs: a plain function
of its inputs and the time (``plan``), so a test or a simulated week drives it with its
own clock.

The health check never waits for a validation (Slurm kills it at 60 s, and a qualify test
takes minutes): it starts one in the background on a node Slurm reports fully drained and
judges its outcome at a later run. Only a passing validation resumes the node. A
validation that could not run is tried again at each health check, ``tries`` times in a
row, then falls back to ``on_error``: ``recheck`` (the check passing again is enough, the
rule before validations) or ``hold`` (kept out for a person). A validation that ran and
failed keeps the node out with its figure, and runs again at the next health check: a
fault that cleared earns its way back, one still there says so again.

A node an operator returned to service (``scontrol reboot nextstate=RESUME``, or a resume)
with its incident still open is validated while idle, and drained again only when that
validation fails; its outcome counts only when it answers a validation started after the
return (``Asked.idle``).

Reasons that are not clusterdiag's (an operator's, NHC's, Slurm's ``Prolog error`` or
``Kill task failed``) are never acted on; the caller checks ``reason.owned`` before.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from ...checks.core.validation import QUALIFY_PREFIX
from ..health.incident import hold_down_s, validation_for
from ..health.lifecycle import Asked, Health, Incident, Outcome, Result, State
from .incidents import incident_check
from .reason import Reason, Verb, parse, write
from .scontrol import NodeState


class Do(enum.Enum):
    NOTHING = "nothing"
    START = "start"  # start the validation in the background
    RESUME = "resume"  # the validation passed: scontrol update State=RESUME
    DRAIN = "drain"  # keep the node out (or take it out again) with ``Step.reason``
    RECHECK = "recheck"  # fallback: resume when the check passes again (healthcheck.may_resume)
    HOLD = "hold"  # fallback: held for a person, drained with ``Step.reason``


@dataclass(frozen=True)
class Policy:
    """``health.validation_tries``, ``health.on_validation_error`` and
    ``health.hold_down_s`` (docs/config.md)."""

    tries: int = 3
    on_error: str = "recheck"
    hold_down_s: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """What to do, why (for the log), the reason to drain with (``DRAIN``, ``HOLD``; for
    ``START`` and ``RECHECK`` the reason to set first when the node's says otherwise),
    and whether ``plan`` changed the lifecycle, which the caller then saves first."""

    do: Do
    why: str
    reason: str | None = None
    changed: bool = False


def fully_drained(node: NodeState) -> bool:
    """Drained with no job on it: what sinfo(1) calls DRAINED ("unavailable for use per
    system administrator request"), not DRAINING ("currently executing a job, but will
    not be allocated additional jobs"). scontrol prints the base state with its flags
    (``IDLE+DRAIN``; slurm_protocol_defs.c, node_state_string_complete()), and Slurm's
    node_state_string() calls a drained node DRAINING while its base state is ALLOCATED
    or MIXED or it is COMPLETING: so the base must be IDLE, and no job completing."""
    parts = [p.rstrip("*~#!%$@^-") for p in node.state.upper().split("+")]
    flags = set(parts)
    return parts[0] in ("IDLE", "DRAINED") and bool(flags & {"DRAIN", "DRAINED"}) \
        and "COMPLETING" not in flags and not node.state.endswith("*")


def in_service(node: NodeState) -> bool:
    """Idle and taking jobs: no drain, down or failing flag, no job completing."""
    parts = [p.rstrip("*~#!%$@^-") for p in node.state.upper().split("+")]
    return parts[0] == "IDLE" and not node.drained and "COMPLETING" not in parts


def incident_of(reason: Reason, now: float) -> Incident:
    """The incident a drain made before this lifecycle kept it (or by a drainer that does
    not record one, as ``qualify --drain``): its check and component from the reason (a
    qualify test's by its check id, ``qualify.gpu_compute``, as the gate records it), at
    ``now``, so its hold-down starts now too."""
    check = incident_check(reason)
    assert check is not None
    return Incident(validation_for(check).family, check, reason.component,
                    reason.detail or "drained with no figure", now)


def _same(incident: Incident, reason: Reason) -> bool:
    own = Reason(Verb.NONE, incident.check, incident.component)
    return (own.check, own.component) == (incident_check(reason), reason.component)


def _with(reason: Reason, incident: Incident, detail: str, verb: Verb | None = None) -> str:
    """The node's reason for ``incident`` with ``detail``: its verb kept (an epilog's stays
    the epilog's) unless told; qualify's reason names its test (``gpu_compute``)."""
    head = f"{incident.check} {incident.component} "
    return write(_reason(reason, incident, detail.removeprefix(head), verb))


def _reason(reason: Reason, incident: Incident, detail: str, verb: Verb | None = None
            ) -> Reason:
    said = reason.verb if verb is None else verb
    return Reason(said, _named(incident.check, said), incident.component, detail)


def _named(check: str, verb: Verb) -> str:
    return check.removeprefix(QUALIFY_PREFIX) if verb is Verb.QUALIFY else check


def _failed(reason: Reason, incident: Incident, outcome: Outcome) -> str:
    """The reason for a failed validation. With its Reading, the figure whole, which
    ``write`` would otherwise cut off at its limit (``qualify gpu_compute gpu2 43004 <
    53572 Gflop/s (peers median)``): the message before it while the whole fits, then
    without; the test and component it is of named where they are not the incident's.
    With the catalog's words (a test id, a component of up to ``MAX_WORD``) it always
    fits; the full text stays in health.json. Without a Reading, the detail as it is."""
    got = outcome.reading
    if got is None:
        return _with(reason, incident, outcome.detail)
    own = _reason(reason, incident, "")
    theirs = Reason(own.verb, _named(got.check, own.verb), got.component)
    name = f"{theirs.check} {theirs.component}" if theirs.check != own.check \
        else theirs.component if theirs.component != own.component else ""
    observed, expected = _pair(got.observed, got.expected)
    op = "<" if got.observed < got.expected else ">" if got.observed > got.expected else "="
    figure = f"{observed} {op} {expected} {got.unit} ({got.basis.value})"
    message = f"{got.message}:" if got.message.strip() else ""
    for words in ((name, message, figure), (name, figure)):  # the message's words go first
        said = _reason(reason, incident, " ".join(w for w in words if w))
        if parse(write(said)) == said:
            break
    return write(said)


def _pair(observed: float, expected: float) -> tuple[str, str]:
    """Both figures in as few digits as keep them apart in the right order (``459.7 <
    460``, not ``460 < 460``): whole above 100, one decimal above 10, else two, and more
    where the two would read the same."""
    digits = 0 if max(abs(observed), abs(expected)) >= 100 else \
        1 if max(abs(observed), abs(expected)) >= 10 else 2
    for places in range(digits, digits + 6):
        said = (f"{observed:.{places}f}", f"{expected:.{places}f}")
        if (float(said[0]) < float(said[1])) == (observed < expected) \
                and (float(said[0]) > float(said[1])) == (observed > expected):
            break
    return _short(said[0]), _short(said[1])


def _short(number: str) -> str:
    return number.rstrip("0").rstrip(".") if "." in number else number


def _left(incident: Incident, policy: Policy, now: float) -> float:
    return incident.at + hold_down_s(validation_for(incident.check), policy.hold_down_s) - now


def _killed(health: Health, now: float) -> bool:
    """A lifecycle left validating with no validation holding the lock: it was killed or
    crashed half-way. Counted as one that could not run."""
    if health.state is not State.VALIDATING:
        return False
    health.finish(Outcome(Result.ERROR, "the validation ended without an outcome (killed, "
                          "or clusterdiag crashed)", now))
    return True


def plan(node: NodeState, health: Health, running: bool, policy: Policy, now: float) -> Step:
    """The step for a node whose last health-check pass was clean. ``node.reason`` is
    clusterdiag's or none; ``health`` is changed in place when ``Step.changed``."""
    reason = parse(node.reason) if node.reason else None
    if node.drained:
        if reason is None or reason.check is None:
            return Step(Do.NOTHING, "no check named in the reason")
        return _drained(node, reason, health, running, policy, now)
    if health.state is State.HEALTHY or health.open is None:
        return Step(Do.NOTHING, "healthy")
    if health.state is State.HELD:
        return Step(Do.NOTHING, "held for repair, yet in service: an operator returned it; "
                    "clusterdiag validate --release validates it")
    if not in_service(node):
        return Step(Do.NOTHING, f"a job runs ({node.state}): validated once idle")
    if running:
        return Step(Do.NOTHING, "a validation is running")
    return _returned(health, policy, now)


def validated(health: Health, reason: Reason) -> bool:
    """Whether the node's lifecycle went healthy on a validation the health check started
    for the drain ``reason`` names, and the node waits to be resumed."""
    last, asked = health.last, health.asked
    return last is not None and last.result is Result.PASSED and asked is not None \
        and not asked.idle and last.at >= asked.at and bool(health.incidents) \
        and _same(health.incidents[-1], reason)


def unrecorded(node: NodeState, health: Health) -> Reason | None:
    """The reason of a drain of ours naming a check that the lifecycle has not recorded
    (a ``qualify --drain`` from a head node, a drain from before the lifecycle was kept),
    to be recorded as the gate records its own: a strike, a fleet event or a hold."""
    reason = parse(node.reason) if node.drained and node.reason else None
    if reason is None or reason.check is None or reason.verb in (Verb.REPAIR, Verb.ERROR) \
            or health.state is not State.HEALTHY or validated(health, reason):
        return None
    return reason


def _drained(node: NodeState, reason: Reason, health: Health, running: bool, policy: Policy,
             now: float) -> Step:
    if reason.verb is Verb.REPAIR or health.state is State.HELD:
        return Step(Do.NOTHING, "held for repair: a person releases it (clusterdiag "
                    "validate --release)")
    if not fully_drained(node):
        return Step(Do.NOTHING, f"not fully drained ({node.state}): validated once no job "
                    "is left")
    if running:
        return Step(Do.NOTHING, "a validation is running")
    changed = _killed(health, now)
    if health.state is State.HEALTHY:
        if validated(health, reason):
            assert health.last is not None
            health.asked = None
            return Step(Do.RESUME, f"validated: {health.last.detail}", changed=True)
        health.drain(incident_of(reason, now))
        return _start(health, False, now, "drained before its incident was recorded")
    assert health.open is not None
    return _judge(health, reason, policy, now, changed, idle=False)


def _returned(health: Health, policy: Policy, now: float) -> Step:
    changed = _killed(health, now)
    asked, last = health.asked, health.last
    if asked is None or not asked.idle or last is None or last.at < asked.at:
        return _start(health, True, now, "returned to service with its incident open")
    assert health.open is not None
    return _judge(health, Reason(Verb.NONE, health.open.check), policy, now, changed,
                  idle=True)


def _start(health: Health, idle: bool, now: float, why: str) -> Step:
    health.asked = Asked(now, idle)
    return Step(Do.START, why, changed=True)


def _judge(health: Health, reason: Reason, policy: Policy, now: float, changed: bool,
           idle: bool) -> Step:
    """The latest outcome of the open incident's validation, and what follows."""
    incident, last = health.open, health.last
    assert incident is not None
    if last is None:
        return _start(health, idle, now, "not validated yet")
    if last.result is Result.FAILED:
        text = _failed(reason, incident, last)
        if idle:
            health.asked = None  # the next return is validated anew
            return Step(Do.DRAIN, f"the validation failed: {last.detail}", text, True)
        step = _start(health, idle, now, f"the validation failed, validating again: "
                      f"{last.detail}")
        return Step(step.do, step.why, text, True)
    if last.result is Result.WAITING:
        left = _left(incident, policy, now)
        if left > 0:
            return Step(Do.NOTHING, f"in its hold-down for {left:.0f} s more",
                        changed=changed)
        return _start(health, idle, now, "its hold-down has ended")
    if health.errors < policy.tries:
        return _start(health, idle, now, f"ERROR the validation could not run (try "
                      f"{health.errors} of {policy.tries}), trying again: {last.detail}")
    said = f"validation could not run {health.errors} times: {policy.on_error}"
    if policy.on_error == "hold":
        health.hold(now)
        return Step(Do.HOLD, f"ERROR {said}", _with(reason, incident, f"({said})",
                                                    Verb.REPAIR), True)
    return Step(Do.RECHECK, f"ERROR {said}", _with(reason, incident, said), changed)


def rechecked(health: Health, why: str, now: float) -> None:
    """The ``recheck`` fallback found the check passing again: the incident closes with
    that as its evidence (validating, then healthy: the only way the lifecycle allows)."""
    health.start(now)
    health.finish(Outcome(Result.PASSED, why, now))
