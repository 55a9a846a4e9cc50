"""A node's health lifecycle: how a drained node comes back only on evidence.

::

    healthy --drain--> drained --start--> validating --pass--> healthy
                          ^  |                 |
                          |  +--hold--+        +--fail / could not run--> drained
                          |           v        |
                          |         held <-----+--hold
                          |           |
                          +-----------+ (never to healthy: --release--> validating;
                                         its strikes a fleet event after all --> drained)

``drained`` names the open incident (check, component, evidence, since); ``validating``
keeps it while the validation its fault class declares runs (checks/core/validation.py);
``held`` is a repeat offender kept for a person, released only into validation. Any other
move is refused (``TransitionError``): a node never jumps from held or drained straight
back to healthy.

Every drain is an incident, counted per fault family with its time, so the gate can
count strikes (N drains of one family in a window, agent/health/policy.py) and tell a
fleet-wide event from a node's own fault (``Incident.fleet``): only a drain known to be the
node's own is a strike. The history is bounded (``MAX_INCIDENTS``, ``MAX_AGE_S``); the running
total per family is kept apart so it only ever grows (a Prometheus counter).
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass, field

MAX_INCIDENTS = 64
MAX_AGE_S = 30 * 86400.0
MAX_FAMILIES = 128  # distinct families with a running total (the catalog has fewer)
MAX_ERRORS = 1_000_000  # errored validations in a row: counted no further


class State(enum.Enum):
    HEALTHY = "healthy"
    DRAINED = "drained"
    VALIDATING = "validating"
    HELD = "held"  # held for repair: a person releases it into validation


ALLOWED: dict[State, frozenset[State]] = {
    State.HEALTHY: frozenset({State.DRAINED}),
    State.DRAINED: frozenset({State.VALIDATING, State.HELD}),
    State.VALIDATING: frozenset({State.HEALTHY, State.DRAINED, State.HELD}),
    # HELD -> DRAINED: a hold whose strikes turn out to be a fleet event is undone
    # (policy.reclassify), back to validation; never straight to healthy.
    State.HELD: frozenset({State.VALIDATING, State.DRAINED}),
}


class Result(enum.Enum):
    """How a validation ended (``clusterdiag validate`` exits 0, 1, 1 and 3 for them)."""

    PASSED = "passed"
    FAILED = "failed"  # it ran and the node failed it: the figure says by how much
    WAITING = "waiting"  # the check passes, but its hold-down has not ended yet
    ERROR = "error"  # it could not run (a tool missing, our error, the budget): never a fail


class TransitionError(ValueError):
    """A move the lifecycle does not allow (healthy -> validating, held -> healthy)."""


@dataclass(frozen=True)
class Incident:
    """One drain: the fault family it counts under, the check and component that failed,
    the evidence (the finding's figure or message, one line) and when."""

    family: str
    check: str
    component: str
    evidence: str
    at: float
    # True: a fleet event (the same check drained on many nodes at once); False: the
    # node's own, a strike; None: unknown (the fleet could not be read), never a strike.
    fleet: bool | None = False


class Basis(enum.Enum):
    """What a failed figure was judged against: the profile's floor, the median of its
    peers, the fleet's recent median (agent/qualify/medians.py), the profile's expected
    figure (checks/qualify/judge.py, grade())."""

    FLOOR = "floor"
    PEERS = "peers median"
    FLEET = "fleet median"
    EXPECTED = "expected"


# A unit as qualify's tools print it (checks/qualify/active.py: GB/s, Gb/s, Gflop/s): one
# short word, so it reads the same in a drain reason and cannot spell anything else there.
UNIT = re.compile(r"[A-Za-z][A-Za-z0-9/%.]{0,15}")
# Larger than any figure a tool prints in its unit (checks/qualify/sanity.py keeps out
# what no measurement can give), so a figure is always a few digits.
MAX_FIGURE = 1e12


@dataclass(frozen=True)
class Reading:
    """A failed validation's figure apart from its text: the check and component it is
    of, the finding's message, the observed value and the expected one in their unit, and
    what the expected value is. The drain reason says it whole in the few characters Slurm
    keeps (agent/slurm/way_back.py), where the text would be cut; ``Outcome.detail`` keeps
    the full account. ValueError for a unit or figure that is not one."""

    check: str
    component: str
    message: str
    observed: float
    expected: float
    unit: str
    basis: Basis

    def __post_init__(self) -> None:
        if not UNIT.fullmatch(self.unit):
            raise ValueError(f"unit {self.unit!r:.40}: not a unit")
        for value in (self.observed, self.expected):
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or abs(value) > MAX_FIGURE:
                raise ValueError(f"{value!r:.40}: not a figure")


@dataclass(frozen=True)
class Outcome:
    """The latest validation, its detail (the figure, or why it could not run), when, and
    a failure's figure where it has one."""

    result: Result
    detail: str
    at: float
    reading: Reading | None = None


@dataclass(frozen=True)
class Asked:
    """When the health check last started a validation of the open incident, and whether
    Slurm had the node in service then (returned by an operator) rather than drained: an
    outcome older than this answers an earlier question."""

    at: float
    idle: bool


@dataclass
class Health:
    state: State = State.HEALTHY
    since: float = 0.0
    open: Incident | None = None  # the incident the node is out for (none when healthy)
    incidents: list[Incident] = field(default_factory=list)  # oldest first, bounded
    totals: dict[str, int] = field(default_factory=dict)  # family -> drains ever counted
    last: Outcome | None = None
    errors: int = 0  # validations of the open incident in a row that could not run
    asked: Asked | None = None

    def _move(self, to: State, now: float) -> None:
        if to not in ALLOWED[self.state]:
            raise TransitionError(f"{self.state.value} -> {to.value} is not allowed "
                                  f"(from {self.state.value}: "
                                  f"{', '.join(sorted(s.value for s in ALLOWED[self.state]))})")
        self.state, self.since = to, now

    def drain(self, incident: Incident) -> None:
        """The node is taken out for ``incident``, counted under its family."""
        self._move(State.DRAINED, incident.at)
        self.open, self.last, self.errors, self.asked = incident, None, 0, None
        self.incidents.append(incident)
        self._count(incident)

    def _count(self, incident: Incident) -> None:
        if incident.family in self.totals or len(self.totals) < MAX_FAMILIES:
            self.totals[incident.family] = self.totals.get(incident.family, 0) + 1
        self.prune(incident.at)

    def record(self, incident: Incident) -> None:
        """A drain, whatever the state: it opens the incident of a healthy node; a node
        already out keeps the incident it is out for (its validation is under way, or
        waiting) and the new drain is only counted, as a strike may be."""
        if self.state is State.HEALTHY:
            self.drain(incident)
            return
        self.incidents.append(incident)
        self._count(incident)

    def start(self, now: float) -> None:
        """The validation of the open incident begins (from drained, or released from held)."""
        self._move(State.VALIDATING, now)

    def finish(self, outcome: Outcome) -> None:
        """The validation's outcome: passed returns the node to service; failed, or could
        not run, leaves it drained with the incident still open."""
        self._move(State.HEALTHY if outcome.result is Result.PASSED else State.DRAINED, outcome.at)
        self.last = outcome
        self.errors = min(self.errors + 1, MAX_ERRORS) if outcome.result is Result.ERROR else 0
        if outcome.result is Result.PASSED:
            self.open = None

    def hold(self, now: float, incident: Incident | None = None) -> None:
        """A repeat offender is kept out for a person (``repair`` in its drain reason);
        ``incident``, the repeated fault, becomes the open one, so the validation a
        release starts is the one that fault calls for."""
        self._move(State.HELD, now)
        if incident is not None:
            self.open = incident

    def unhold(self, now: float) -> None:
        """A hold undone: the strikes that made it turn out to be a fleet event
        (policy.reclassify), so the node is drained for its open incident again and earns
        its way back through validation like any other."""
        self._move(State.DRAINED, now)
        self.last, self.errors, self.asked = None, 0, None

    def reclassify(self, old: Incident, new: Incident) -> None:
        """``old``, one of the recorded drains, is ``new`` after all (its fleet judged
        again); the open incident too when it is that drain."""
        self.incidents = [new if i == old else i for i in self.incidents]
        if self.open == old:
            self.open = new

    def prune(self, now: float) -> None:
        """Forget incidents older than ``MAX_AGE_S`` and beyond the newest ``MAX_INCIDENTS``."""
        young = [i for i in self.incidents if now - i.at <= MAX_AGE_S]
        self.incidents = young[-MAX_INCIDENTS:]

    def count(self, family: str, window_s: float, now: float) -> int:
        """Drains of ``family`` within ``window_s`` before ``now`` known to be the node's
        own (neither a fleet event nor unknown): the strikes."""
        return sum(1 for i in self.incidents if i.family == family and i.fleet is False
                   and 0 <= now - i.at <= window_s)


