"""What a drain means for a node's way back: a strike, a fleet event, or nothing held
while the circuit breaker is open. Plain functions of the lifecycle, the ``health:``
settings, what Slurm says of the fleet and the time, so a test or a simulated week drives
them with its own clock (agent/slurm/incidents.py is the gate's caller).

- A strike is a drain known to be the node's own (``Incident.fleet is False``). When the
  node's strikes of one family within ``strike_window_s`` reach ``strikes``, the node is
  held for repair: a fault that keeps coming back is not cured by passing its validation
  again (the issue's 504-GPU study: 3 nodes of 63 behind over half of all exclusions).
- A fleet event is the same check drained on more than ``fleet_event_share`` of the
  fleet's nodes within ``fleet_event_window_s`` (a subnet manager restart, a driver
  roll-out): the drain is recorded, never a strike. When the fleet could not be read the
  drain is recorded as unknown, never a strike either: our own trouble holds no node.
  The first drains of an event, before the count crosses the share, read as the nodes'
  own when they happen; the health check judges them again once the event is visible
  (``reclassify``), and undoes a hold they made.
- The circuit breaker: more than ``breaker_share`` of the fleet's nodes drained by
  clusterdiag is more likely our own error (a bad config push, a bug) or a site-wide
  event than that many broken nodes, so no node is held for repair and the health check
  drains nothing more (docs/return-to-service.md says who still drains and why).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .lifecycle import Health, Incident, State

DAY_S = 86_400.0


@dataclass(frozen=True)
class Settings:
    """The ``health:`` section (agent/settings/config.py holds the defaults and ranges)."""

    strikes: int = 3
    strike_window_s: float = 7 * DAY_S
    fleet_event_share: float = 0.1
    fleet_event_window_s: float = 600.0
    breaker_share: float = 0.2

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> Settings:
        return cls(int(section["strikes"]), float(section["strike_window_s"]),
                   float(section["fleet_event_share"]), float(section["fleet_event_window_s"]),
                   float(section["breaker_share"]))


@dataclass(frozen=True)
class Peer:
    """One node of the fleet as Slurm sees it: whether it is drained by clusterdiag, the
    check our reason names (None for our own trouble, or not ours), and when the reason was
    set (None when Slurm did not say, or said it in a form we cannot read)."""

    name: str
    ours: bool
    check: str | None = None
    at: float | None = None


@dataclass(frozen=True)
class Breaker:
    """Drained by clusterdiag against the fleet's nodes, and whether that is too many."""

    drained: int
    total: int
    share_limit: float

    @property
    def share(self) -> float:
        return self.drained / self.total if self.total else 0.0

    @property
    def open(self) -> bool:
        return self.share > self.share_limit

    def __str__(self) -> str:
        over = f", over {self.share_limit:.0%}" if self.open else ""
        return (f"{self.drained} of {self.total} nodes drained by clusterdiag "
                f"({self.share:.0%}{over})")


def breaker(fleet: Iterable[Peer], node: str, settings: Settings) -> Breaker:
    """The fleet's nodes drained by clusterdiag, ``node`` (the one draining now) left out:
    the breaker judges the fleet as this drain finds it, so on a small cluster one drain
    does not trip it on itself."""
    peers = list(fleet)
    return Breaker(sum(p.ours for p in peers if p.name != node), len(peers),
                   settings.breaker_share)


# A fleet event is at least this many nodes: on a fleet of fewer than ten nodes one drain
# is over a tenth of it, and a lone node's fault must stay a strike.
FLEET_EVENT_MIN_NODES = 2


def fleet_event(fleet: Iterable[Peer], check: str, now: float, settings: Settings) -> bool:
    """Whether ``check`` is drained on more than the fleet event share of the fleet (and
    on at least ``FLEET_EVENT_MIN_NODES``) within the window around ``now``, the node
    draining now counted. A reason whose time is unknown is not counted: a fleet event
    then reads as the node's own, the safe side for a node that fails again and again."""
    peers = list(fleet)
    hits = sum(1 for p in peers if p.ours and p.check == check and p.at is not None
               and abs(now - p.at) <= settings.fleet_event_window_s)
    return hits >= FLEET_EVENT_MIN_NODES and hits / len(peers) > settings.fleet_event_share


@dataclass(frozen=True)
class Decision:
    """What a drain does to the lifecycle: ``hold`` when the node is (or stays) held for
    repair, with its ``strikes`` of the family within the window once this drain counts."""

    hold: bool
    strikes: int


def decide(health: Health, incident: Incident, settings: Settings,
           breaker_open: bool) -> Decision:
    """Whether ``incident``, a drain that happened, holds the node: it is a strike (the
    node's own) that makes the family's strikes within the window reach
    ``settings.strikes``, and the breaker is closed. A node already held stays held
    whatever this drain is: only a person's ``clusterdiag validate --release`` frees it."""
    strikes = health.count(incident.family, settings.strike_window_s, incident.at) \
        + (incident.fleet is False)
    reached = incident.fleet is False and not breaker_open and strikes >= settings.strikes
    return Decision(reached or health.state is State.HELD, strikes)


def apply(health: Health, incident: Incident, decision: Decision) -> None:
    """Record the drain; hold the node when ``decision`` says so (the repeated fault
    becomes the open incident; a node already held keeps the one it is held for)."""
    health.record(incident)
    if decision.hold and health.state is not State.HELD:
        health.hold(incident.at, incident)


# How long after a drain the health check judges it against the fleet again: the window
# itself (the drains after it that count) and an hour more, so that a health check
# interval far beyond Slurm's recommended 300 s (docs/slurm.md) still runs once in it.
# The nodes of an event stay drained at least their hold-down, so they are still in
# Slurm's view then; past it, the fleet is read no more for this drain.
REJUDGE_S = 3600.0


def _rejudged(incident: Incident, now: float, settings: Settings) -> bool:
    return incident.fleet is False \
        and 0 <= now - incident.at <= settings.fleet_event_window_s + REJUDGE_S


def rejudge_due(health: Health, now: float, settings: Settings) -> bool:
    """Whether a drain the node counts as its own is recent enough to be judged against
    the fleet again: only then does the health check read the fleet."""
    return any(_rejudged(i, now, settings) for i in health.incidents)


@dataclass(frozen=True)
class Rejudged:
    """What ``reclassify`` changed: the node's drains found to be a fleet event, and
    whether that undid its hold."""

    incidents: int
    unheld: bool


def reclassify(health: Health, fleet: Iterable[Peer], node: str, now: float,
               settings: Settings) -> Rejudged:
    """Judge the node's recent own drains against the fleet as Slurm shows it now: one
    that ``fleet_event`` finds the same check on more than the share of the fleet within
    the window of its time (``node`` counted at that time, for that check) is a fleet
    event after all, no strike. A node held for repair whose strikes then fall short of
    ``settings.strikes`` (and reached it before) was held on a fleet event: it goes back
    to drained, and its validation decides. A hold for another reason (validations that
    could not run, ``on_validation_error: hold``) is left as it is."""
    others = [p for p in fleet if p.name != node]
    held = health.open if health.state is State.HELD else None
    window = settings.strike_window_s

    def reached() -> bool:
        return held is not None and \
            health.count(held.family, window, held.at) >= settings.strikes

    was = reached()
    found = 0
    for incident in list(health.incidents):
        if _rejudged(incident, now, settings) and fleet_event(
                [*others, Peer(node, True, incident.check, incident.at)], incident.check,
                incident.at, settings):
            health.reclassify(incident, replace(incident, fleet=True))
            found += 1
    unheld = bool(found) and was and not reached()
    if unheld:
        health.unhold(now)
    return Rejudged(found, unheld)


def span(seconds: float) -> str:
    """A window in the reason's words: ``7 d``, ``36 h``, ``90 min``, ``45 s``."""
    for unit, size in (("d", DAY_S), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"
