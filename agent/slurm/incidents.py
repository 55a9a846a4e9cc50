"""The gate's drains in the node's lifecycle: each drain that happened becomes an incident
in ``health.json`` (agent/health/store.py, in ``agent.state_dir``), a repeat offender is
held for repair (its reason becomes ``repair``), and the circuit breaker stops the health
check's drains. The decisions are agent/health/policy.py's; this is where Slurm and the
state file meet them.

The gate runs as root and the state directory belongs to the agent's user: the file is
hostile input when read (the store validates it and sets a bad one aside), and a failure
to read the fleet or to read or write the file is logged loudly and never blocks or
changes the drain: our own trouble never strands a node, nor holds one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ..health import policy, store
from ..health.incident import validation_for
from ..health.lifecycle import Incident, State
from .reason import Reason, Verb, parse, write
from .scontrol import NodeState, Scontrol, SlurmError


class Run(Protocol):
    """What a drain needs of entry.Run: the program, the node, the config and the log."""

    program: str
    node: str
    config: Any

    def log(self, event: str, **fields: Any) -> None: ...

HOLDS = "healthcheck"  # the program whose drains the breaker stops (docs/return-to-service.md)


def incident_check(reason: Reason | None) -> str | None:
    """The check an incident names for one of our reasons: qualify's tests by their check
    id (``qualify.nic``), as ``clusterdiag validate`` finds their validation; None for our
    own trouble, which is no incident."""
    if reason is None or reason.check is None or reason.verb is Verb.ERROR:
        return None
    return f"qualify.{reason.check}" if reason.verb is Verb.QUALIFY else reason.check


def peers(nodes: list[NodeState]) -> list[policy.Peer]:
    """The fleet as the policy reads it: who is drained by clusterdiag, for what, since
    when."""
    out = []
    for node in nodes:
        reason = parse(node.reason) if node.drained else None
        out.append(policy.Peer(node.name, reason is not None, incident_check(reason),
                               node.reason_time))
    return out


def repair_reason(incident: Incident, strikes: int, window_s: float) -> str:
    """``clusterdiag: repair nvlink.error_rate gpu3 (3 drains in 7 d)``."""
    return write(Reason(Verb.REPAIR, incident.check, incident.component,
                        f"({strikes} drains in {policy.span(window_s)})"))


class Gate:
    """One drain by ``run``: ``before`` is the node as Slurm showed it, ``reason`` the one
    being set. The fleet is read at most once (``scontrol show node`` of every node)."""

    def __init__(self, run: Run, scontrol: Scontrol, before: NodeState, reason: Reason | None,
                 clock: Callable[[], float] = time.time) -> None:
        self.run = run
        self.scontrol = scontrol
        self.before = before
        self.check = incident_check(reason)
        self.reason = reason
        self.now = clock()
        self.settings = policy.Settings.of(run.config.section("health"))
        self._fleet: list[policy.Peer] | None = None
        self._read = False

    def fleet(self) -> list[policy.Peer] | None:
        """The fleet, this node counted as drained for this check now; None (logged) when
        Slurm could not say."""
        if not self._read:
            self._read = True
            try:
                nodes = self.scontrol.show_nodes()
            except SlurmError as exc:
                self.run.log("ERROR could not read the fleet from Slurm: this drain is no "
                             "strike, and the circuit breaker is not judged", error=exc)
                return None
            self._fleet = [p for p in peers(nodes) if p.name != self.run.node]
            self._fleet.append(policy.Peer(self.run.node, True, self.check, self.now))
        return self._fleet

    def breaker(self) -> policy.Breaker | None:
        fleet = self.fleet()
        return None if fleet is None else policy.breaker(fleet, self.run.node, self.settings)

    def stops_drain(self) -> bool:
        """Whether the circuit breaker stops this drain: the health check's only, the
        prolog's and epilog's fail drains the node whatever we do (Slurm drains a node
        whose prolog or epilog fails) and ``qualify --drain`` is a person's command."""
        if self.run.program != HOLDS or self.check is None:
            return False
        tripped = self.breaker()
        if tripped is None or not tripped.open:
            return False
        self.run.log(f"ERROR circuit breaker open: {tripped}; not draining (fix what drains "
                     "the fleet, or raise health.breaker_share)", drained=tripped.drained,
                     nodes=tripped.total, share=f"{tripped.share:.3f}")
        return True

    def _new_drain(self) -> bool:
        """Whether the drain is a new incident: not the same check's drain again with a
        new figure (the health check rewrites the reason of a node still failing)."""
        if not self.before.drained:
            return True
        return incident_check(parse(self.before.reason)) != self.check

    def drained(self) -> None:
        """Record the drain that happened, and hold the node when it is a repeat offender;
        never raises, never undoes the drain."""
        if self.check is None or self.reason is None:
            return
        try:
            self._record(self.check, self.reason)
        except Exception as exc:  # noqa: BLE001 - our bug must not fail or undo the drain
            self.run.log("ERROR could not record the drain in the node's lifecycle",
                         error=f"{type(exc).__name__}: {exc}")

    def _record(self, check: str, reason: Reason) -> None:
        state_dir = Path(self.run.config.section("agent")["state_dir"])
        health = store.load(state_dir)
        if not self._new_drain() and health.open is not None:
            return
        event = self.fleet_event()
        incident = Incident(validation_for(check).family, check, reason.component,
                            reason.detail[:store.MAX_TEXT], self.now, event)
        tripped = self.breaker()
        decision = policy.decide(health, incident, self.settings,
                                 tripped is not None and tripped.open)
        if tripped is not None and tripped.open:
            self.run.log(f"ERROR circuit breaker open: {tripped}; not holding for repair",
                         drained=tripped.drained, nodes=tripped.total,
                         share=f"{tripped.share:.3f}")
        if decision.hold:
            held = health.open if health.state is State.HELD and health.open else incident
            strikes = decision.strikes if held is incident else health.count(
                held.family, self.settings.strike_window_s, self.now)
            decision = self._hold(held, strikes, decision)
        policy.apply(health, incident, decision)
        try:
            store.save(state_dir, health)
        except OSError as exc:
            self.run.log("ERROR could not record the drain in the node's lifecycle",
                         file=str(state_dir / store.NAME), error=exc.strerror or exc)
            return
        self.run.log("incident recorded", check=incident.check, family=incident.family,
                     fleet="unknown" if event is None else str(event).lower(),
                     strikes=decision.strikes, state=health.state.value)

    def fleet_event(self) -> bool | None:
        fleet = self.fleet()
        if fleet is None or self.check is None:
            return None
        return policy.fleet_event(fleet, self.check, self.now, self.settings)

    def _hold(self, held: Incident, strikes: int, decision: policy.Decision
              ) -> policy.Decision:
        """The reason becomes ``repair``; when Slurm refuses, the node is not held (the
        next drain of the family holds it)."""
        text = repair_reason(held, strikes, self.settings.strike_window_s)
        try:
            self.scontrol.drain(self.run.node, text)
        except SlurmError as exc:
            self.run.log("ERROR could not hold the node for repair", error=exc, reason=text)
            return policy.Decision(False, decision.strikes)
        self.run.log("held for repair", reason=text, strikes=decision.strikes)
        return decision
