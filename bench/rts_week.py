"""Return to service over a simulated week: 64 simulated DGX H100 nodes, a health check on
every node every ``HealthCheckInterval`` (300 s, spread over the interval as
``HealthCheckNodeState=CYCLE`` does: docs/slurm.md), an injected clock, and planted faults:
an NVLink and an IB port that flap (down for minutes, passing every state check between
episodes), a slow GPU that no state check sees (``gpu_slow``, drained by a person's
``qualify --drain``), a fleet-wide event (an IB port left in INIT on 20 nodes within a
minute, as a subnet manager restart leaves them), a service down for a quarter of an
hour, and healthy controls.

What runs is the real decision code: the real ``quick`` checks on the simulated node with
its faults of the moment (one run per distinct set of faults: the same node state gives
the same findings), the gate's drain (``entry.drain``: incidents, strikes, fleet events,
the circuit breaker), the health check's way back (``healthcheck.resume_if_ours``: the
fleet judged again, the lifecycle judged, the validation started under its lock) and
``clusterdiag validate`` itself with the simulated qualify tools, against an in-memory
``scontrol`` that answers ``show node``, the fleet view ``show node -o`` and ``update`` as
Slurm prints them. Each validation holds the real lock for its run time (``RUN_S``,
stand-ins for the tools' minutes) and ends at the clock's time then; the simulated
qualify tools of one node in one fault state are run once (``Memo``): their figures are
a function of the spec, the node and the tests.

It prints: how long each node stayed out after its fault cleared, against the hold-down,
one health-check interval and its validation (whose outcome the next health check reads,
so its run time counts whole intervals); when each flapping node was held for repair (its
own drains then); the strikes counted from the fleet event; and whether the slow GPU (or
any node) was ever resumed without a passing validation, or with its fault present.

    .venv/bin/python bench/rts_week.py [--quick] [--json]

``--quick``: 8 nodes for one day, the same kinds of fault (what tests/integration runs).
"""

from __future__ import annotations

import datetime as dt
import heapq
import math
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from common import Figure, emit, module_note

from clusterdiag.agent.health import store
from clusterdiag.agent.health.incident import validation_for
from clusterdiag.agent.health.lifecycle import Result, State
from clusterdiag.agent.qualify import validate as validate_module
from clusterdiag.agent.run import session
from clusterdiag.agent.run.runner import run_node
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.faults.catalog import FAULTS
from clusterdiag.agent.slurm import entry, healthcheck
from clusterdiag.agent.slurm.entry import Inputs
from clusterdiag.agent.slurm.log import Log
from clusterdiag.agent.slurm.reason import Reason, Verb, from_findings, write
from clusterdiag.agent.slurm.scontrol import Scontrol, SlurmError
from clusterdiag.checks.core.finding import Finding, Status
from clusterdiag.checks.core.validation import Kind

HOUR = 3600.0
DAY = 24 * HOUR
# HealthCheckInterval as docs/slurm.md recommends it (slurm.conf(5): seconds between runs).
INTERVAL_S = 300.0
PROFILE = "dgx-h100"
# How long a validation runs, by kind: a recheck is one check at the full level; the qualify
# tests of one node (all-reduce and nvbandwidth, a gpu-burn) take minutes. Stand-ins: the
# simulated tools answer at once, and the figures hold as long as a run is shorter than
# the interval (its outcome is read by the next health check either way).
RUN_S = {Kind.RECHECK: 30.0, Kind.QUALIFY: 240.0}
# Local midnight as the week's start (Slurm prints its times in local time).
EPOCH = dt.datetime(2026, 1, 5).timestamp()


@dataclass(frozen=True)
class Episode:
    """A planted fault on ``node`` from ``start`` to ``end`` (seconds into the run)."""

    node: str
    kind: str
    start: float
    end: float
    options: tuple[tuple[str, Any], ...] = ()

    def active(self, t: float) -> bool:
        return self.start <= t < self.end

    def spec(self) -> dict[str, Any]:
        return {"node": self.node, "kind": self.kind, **dict(self.options)}


@dataclass(frozen=True)
class Plan:
    """The run: its nodes, length, planted faults, who plays which part, and when a person
    drains the slow GPU's node (``qualify --drain``)."""

    nodes: tuple[str, ...]
    span_s: float
    episodes: tuple[Episode, ...]
    flappers: tuple[str, ...]
    fleet: tuple[str, ...]
    fleet_check: str
    fleet_at: float
    slow: str
    slow_drain_at: float


NVLINK = (("gpu", 3), ("link", 7))
IB = (("hca", "mlx5_0"), ("port", 1))


def plan(nodes: int, days: int) -> Plan:
    """The week (64 nodes, 7 days) or its short form (8 nodes, one day): the same parts at
    times scaled to the span. The IB flapper is the first node of the fleet event, with
    two strikes by then: read alone, the event's first drain is its third."""
    names = tuple(f"gpu{i:02d}" for i in range(1, nodes + 1))
    span = days * DAY

    def at(share: float) -> float:  # a time as a share of the span, on a whole minute
        return math.floor(share * span / 60) * 60

    # Before the fleet event, every node but the flappers is back in service, so the
    # circuit breaker (over a fifth of the fleet drained) is judged on the event alone.

    nvlink, ib, slow, service = names[1], names[2], names[-1], names[-2]
    fleet_n = max(3, round(nodes * 20 / 64))
    fleet = (ib, *names[3:3 + fleet_n - 1])
    fleet_at = at(0.45)
    episodes = [
        *(Episode(nvlink, "nvlink_down", at(s), at(s) + minutes * 60, NVLINK)
          for s, minutes in ((0.06, 25), (0.2, 15), (0.5, 30), (0.7, 20))),
        *(Episode(ib, "ib_port_down", at(s), at(s) + minutes * 60, IB)
          for s, minutes in ((0.1, 10), (0.3, 12), (0.75, 10))),
        *(Episode(node, "ib_port_init", fleet_at + 3 * j, fleet_at + 8 * 60, IB)
          for j, node in enumerate(fleet)),
        Episode(slow, "gpu_slow", at(0.12), at(0.4), (("gpu", 2),)),
        Episode(service, "fabric_manager_down", at(0.4), at(0.4) + 15 * 60),
    ]
    return Plan(names, span, tuple(episodes), (nvlink, ib), fleet,
                FAULTS["ib_port_init"].check, fleet_at, slow, at(0.15))


class FakeSlurm(Scontrol):
    """``scontrol`` for the simulated nodes, in memory: answers ``show node NAME -o``, the
    fleet view ``show node -o`` and ``update`` with the lines Slurm prints (the reason's
    time as ``[user@%FT%T]`` in local time: SchedMD/slurm src/api/node_info.c,
    slurm_sprint_node_table(); parse_time.c, slurm_make_time_str()), so scontrol.py's
    parser reads them as it reads Slurm's. Every resume and drain is kept, with the time."""

    def __init__(self, names: Iterable[str], clock: Callable[[], float]) -> None:
        super().__init__(environ={})
        self.clock = clock
        self.nodes: dict[str, tuple[str | None, float]] = {n: (None, 0.0) for n in names}
        self.resumes: list[tuple[str, float]] = []
        self.drains: list[tuple[str, float, str]] = []
        self.on_resume: Callable[[str], None] = lambda _node: None

    def _line(self, name: str) -> str:
        reason, at = self.nodes[name]
        if reason is None:
            return f"NodeName={name} Arch=x86_64 CPUTot=224 State=IDLE ThreadsPerCore=2"
        stamp = dt.datetime.fromtimestamp(at).strftime("%Y-%m-%dT%H:%M:%S")
        return (f"NodeName={name} Arch=x86_64 CPUTot=224 State=IDLE+DRAIN ThreadsPerCore=2 "
                f"Reason={reason} [root@{stamp}]")

    def _run(self, *args: str, max_bytes: int | None = None,
             extra_env: Any = None) -> str:
        if args[:2] == ("show", "node") and args[2] == "-o":
            return "\n".join(self._line(n) for n in self.nodes) + "\n"
        if args[:2] == ("show", "node"):
            return self._line(args[2]) + "\n"
        if args[0] == "update":
            fields = dict(a.split("=", 1) for a in args[1:])
            name, now = fields["NodeName"], float(int(self.clock()))
            if fields["State"] == "RESUME":
                self.nodes[name] = (None, now)
                self.resumes.append((name, now - EPOCH))
                self.on_resume(name)
            else:
                self.nodes[name] = (fields["Reason"], now)
                self.drains.append((name, now - EPOCH, fields["Reason"]))
            return ""
        raise SlurmError(f"scontrol {' '.join(args)}: not simulated")


class Quiet(Log):
    """The program's log lines, kept instead of written to stderr."""

    def __init__(self, program: str, node: str) -> None:
        super().__init__(program, node=node)
        self.lines: list[str] = []

    def __call__(self, event: str, **fields: Any) -> None:
        self.lines.append(event)


class SimRun(entry.Run):
    """One node's health check: its own config and state directory, the fake Slurm."""

    def __init__(self, node: str, state_dir: Path, slurm: FakeSlurm) -> None:
        config = Config()
        config.data["agent"]["state_dir"] = str(state_dir)
        self.program, self.config, self.node = "healthcheck", config, node
        self.log = Quiet("healthcheck", node)
        self.inputs = Inputs(node=node)
        self.deadline = math.inf
        self.slurm = slurm

    def scontrol(self) -> Scontrol:
        return self.slurm


class Memo:
    """The simulated qualify tools of one node in one fault state, run once: validate's
    ``_qualify`` wrapped for the run, keyed by the spec file (one per node and fault
    state), the node and the tests."""

    def __init__(self) -> None:
        self.real = validate_module._qualify
        self.seen: dict[tuple[str | None, str | None, tuple[str, ...]], Any] = {}
        self.runs = 0

    def __call__(self, request: validate_module.Request, config: Config,
                 tests: tuple[str, ...]) -> tuple[Result, str]:
        key = (request.simulate, request.node, tests)
        if key not in self.seen:
            self.runs += 1
            self.seen[key] = self.real(request, config, tests)
        found: tuple[Result, str] = self.seen[key]
        return found


@dataclass
class Week:
    """The run's state: the clock, Slurm, each node's run, the validations under way
    (node -> when it ends, the lock's descriptor, its spec), and what was seen."""

    plan: Plan
    work: Path
    now: float = EPOCH
    runs: dict[str, SimRun] = field(default_factory=dict)
    running: dict[str, tuple[float, int, str]] = field(default_factory=dict)
    findings: dict[tuple[Episode, ...], list[Finding]] = field(default_factory=dict)
    specs: dict[tuple[str, tuple[Episode, ...]], str] = field(default_factory=dict)
    bad_resumes: list[str] = field(default_factory=list)
    validations: int = 0
    events: list[tuple[float, int, str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.slurm = FakeSlurm(self.plan.nodes, lambda: self.now)
        self.slurm.on_resume = self.resumed
        for node in self.plan.nodes:
            (self.work / node).mkdir()
            self.runs[node] = SimRun(node, self.work / node, self.slurm)

    def faults(self, node: str, t: float) -> tuple[Episode, ...]:
        return tuple(e for e in self.plan.episodes if e.node == node and e.active(t))

    def spec(self, node: str, faults: tuple[Episode, ...]) -> str:
        """A one-node spec file with the node's faults of the moment."""
        key = (node, faults)
        if key not in self.specs:
            path = self.work / f"spec-{len(self.specs)}.yaml"
            path.write_text(yaml.safe_dump({"nodes": [{"names": node, "profile": PROFILE}],
                                            "faults": [e.spec() for e in faults]}))
            self.specs[key] = str(path)
        return self.specs[key]

    def quick(self, node: str, faults: tuple[Episode, ...]) -> list[Finding]:
        """The health check's ``quick`` checks on the simulated node with ``faults``: run
        once per fault set (the node's name is no input to a check's verdict)."""
        kinds = tuple(Episode("sim", e.kind, 0, 0, e.options) for e in faults)
        if kinds not in self.findings:
            config, env = session.setup(None, None, None, self.spec("sim", kinds), "sim")
            options = session.run_options(config, "quick", None, None, None,
                                          mode="healthcheck")
            self.findings[kinds] = run_node(env, config, options).findings
        return self.findings[kinds]

    def health_check(self, node: str) -> None:
        """What ``clusterdiag healthcheck`` does (entry.decide, then healthcheck.act): a
        fail drains; a clean pass walks the way back."""
        run = self.runs[node]
        findings = self.quick(node, self.faults(node, self.now - EPOCH))
        fails = [f for f in findings if f.status is Status.FAIL]
        if fails:
            picked = from_findings(fails, program="healthcheck")
            if picked is not None:
                entry.drain(run, write(picked), picked, clock=lambda: self.now)
            return
        if any(f.status is Status.ERROR for f in findings):
            return
        healthcheck.resume_if_ours(run, findings, clock=lambda: self.now, start=self.start)

    def start(self, run: entry.Run, state_dir: Path, fd: int) -> int:
        """The validation's start: the lock stays held (a descriptor of its own) until it
        ends, ``RUN_S`` later, on the node as it was when it started."""
        health = store.load(state_dir)
        assert health.open is not None
        kind = validation_for(health.open.check).kind
        spec = self.spec(run.node, self.faults(run.node, self.now - EPOCH))
        ends = self.now + RUN_S[kind]
        self.running[run.node] = (ends, os.dup(fd), spec)
        heapq.heappush(self.events, (ends, -1, "finish", run.node))
        return 0

    def finish(self, node: str) -> None:
        ends, fd, spec = self.running.pop(node)
        request = validate_module.Request(self.work / node, node, spec, clock=lambda: ends,
                                          lock_fd=fd)
        validate_module.validate(request, self.runs[node].config)
        self.validations += 1

    def resumed(self, node: str) -> None:
        """Every resume: after a validation that passed, with no fault planted now."""
        health = store.load(self.work / node)
        present = self.faults(node, self.now - EPOCH)
        if health.last is None or health.last.result is not Result.PASSED or present:
            self.bad_resumes.append(f"{node} at {self.now - EPOCH:.0f} s")

    def person_drains_slow_gpu(self) -> None:
        """``qualify --drain`` by a person: the slow GPU's figure in qualify's reason (no
        incident: the lifecycle lives on the node, docs/return-to-service.md)."""
        self.slurm.drain(self.plan.slow, write(Reason(Verb.QUALIFY, "gpu_compute", "gpu2",
                                                      "gpu_compute 41.3 TFLOPS")))

    def run(self) -> None:
        """Every event in time order: each node's health checks (node ``i`` at ``i``
        64ths of the interval, as CYCLE spreads them), the validations' ends and the
        person's drain."""
        step = INTERVAL_S / len(self.plan.nodes)
        self.events = [(EPOCH + i * step, i, "check", node)
                       for i, node in enumerate(self.plan.nodes)]
        self.events.append((EPOCH + self.plan.slow_drain_at, -1, "person", self.plan.slow))
        heapq.heapify(self.events)
        end = EPOCH + self.plan.span_s
        while self.events:
            at, order, what, node = heapq.heappop(self.events)
            if at >= end:
                break
            self.now = at
            if what == "finish":
                self.finish(node)
            elif what == "person":
                self.person_drains_slow_gpu()
            else:
                self.health_check(node)
                heapq.heappush(self.events, (at + INTERVAL_S, order, what, node))


def _periods(week: Week, node: str) -> list[tuple[float, float]]:
    """The node's times out: from each drain with no drain before it since its last
    resume, to the resume that ended it (seconds into the run)."""
    moves = sorted([(t, "drain") for n, t, _ in week.slurm.drains if n == node]
                   + [(t, "resume") for n, t in week.slurm.resumes if n == node])
    out, since = [], None
    for t, move in moves:
        if move == "drain" and since is None:
            since = t
        elif move == "resume" and since is not None:
            out.append((since, t))
            since = None
    return out


def stays(week: Week) -> list[tuple[str, float, float]]:
    """Each time a node came back: how long after its fault cleared, and the bound (the
    hold-down, one interval, the validation's run time in whole intervals)."""
    found = []
    for node in week.plan.nodes:
        for drained, resumed in _periods(week, node):
            mine = [e for e in week.plan.episodes if e.node == node
                    and e.start <= resumed and e.end >= drained]
            if not mine:
                continue
            cleared = max(e.end for e in mine)
            validation = validation_for(FAULTS[mine[-1].kind].check)
            bound = validation.hold_down_s + INTERVAL_S + \
                math.ceil(RUN_S[validation.kind] / INTERVAL_S) * INTERVAL_S
            found.append((node, resumed - cleared, bound))
    return found


def held(week: Week, node: str) -> tuple[float, int] | None:
    """When ``node`` was held for repair (its lifecycle at the end), and its own drains
    (strikes) by then."""
    health = store.load(week.work / node)
    if health.state is not State.HELD or health.open is None:
        return None
    family = health.open.family
    own = sum(1 for i in health.incidents
              if i.family == family and i.fleet is False and i.at <= health.since)
    return health.since - EPOCH, own


def fleet_strikes(week: Week) -> tuple[int, int]:
    """The fleet event's drains, and how many of them count as a strike at the end."""
    drains = strikes = 0
    for node in week.plan.fleet:
        for i in store.load(week.work / node).incidents:
            if i.check == week.plan.fleet_check and \
                    0 <= i.at - EPOCH - week.plan.fleet_at <= 2 * INTERVAL_S:
                drains += 1
                strikes += i.fleet is False
    return drains, strikes


# The health check's line when it finds a node's own drains a fleet event after all.
REJUDGED = "drains judged a fleet event after all, no strike"


def judged(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def figures(week: Week) -> tuple[list[Figure], list[str]]:
    """The figures, each with its goal and whether it was met, and a line of detail each."""
    size = f"{len(week.plan.nodes)} nodes, {week.plan.span_s / DAY:g} d"
    back = stays(week)
    worst = max(back, key=lambda s: s[1] - s[2]) if back else ("none", 0.0, 0.0)
    over = [s for s in back if s[1] > s[2]]
    out = [(Figure(f"rts week ({size}): longest out after the fault cleared",
                   round(max(s[1] for s in back) if back else 0.0), "s",
                   f"<= hold-down + {INTERVAL_S:g} s + validation, each return "
                   f"({len(back)} returns, {len(over)} over: {judged(not over)})"),
            f"closest to its bound: {worst[0]}, {worst[1]:.0f} s of {worst[2]:.0f} s")]
    for node in week.plan.flappers:
        found = held(week, node)
        out.append((Figure(f"rts week ({size}): {node} (flapping) held for repair at own drain no.",
                          found[1] if found else 0, "",
                          f"3 ({judged(found is not None and found[1] == 3)})"),
                          f"held at {found[0] / HOUR:.1f} h" if found else "never held"))
    drains, strikes = fleet_strikes(week)
    again = sum(week.runs[n].log.lines.count(REJUDGED) for n in week.plan.fleet)
    out.append((Figure(f"rts week ({size}): strikes from the fleet event", strikes, "",
                       f"0 ({judged(strikes == 0)})"),
                f"{drains} of {len(week.plan.fleet)} nodes drained, the rest stopped by "
                f"the circuit breaker; {again} first read as the node's own, judged again"))
    slow = [r for r in week.bad_resumes if r.startswith(week.plan.slow)]
    out.append((Figure(f"rts week ({size}): slow GPU resumed without a passing validation",
                      len(slow), "times", f"0 ({judged(not slow)})"),
                      f"resumed {sum(n == week.plan.slow for n, _ in week.slurm.resumes)} "
                      "times in all"))
    out.append((Figure(f"rts week ({size}): any node resumed without a passing validation "
                      "or with its fault present", len(week.bad_resumes), "times",
                      f"0 ({judged(not week.bad_resumes)})"),
                      f"{week.validations} validations"))
    controls = set(week.plan.nodes) - {e.node for e in week.plan.episodes} - {week.plan.slow}
    wrong = sorted({n for n, _, _ in week.slurm.drains if n in controls})
    out.append((Figure(f"rts week ({size}): healthy controls drained", len(wrong), "",
                      f"0 ({judged(not wrong)})"), f"{len(controls)} controls"))
    return [f for f, _ in out], [f"{f.name}: {note}" for f, note in out]


def simulate(nodes: int, days: int, work: Path) -> Week:
    """Run the plan with each node's state directory under ``work`` (empty), the qualify
    tools memoized for the run."""
    memo = Memo()
    real = validate_module._qualify
    validate_module._qualify = memo  # type: ignore[assignment]
    try:
        week = Week(plan(nodes, days), work)
        week.run()
    finally:
        validate_module._qualify = real  # type: ignore[assignment]
    return week


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    print(module_note(), file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="clusterdiag-rts-week-") as work:
        week = simulate(8, 1, Path(work)) if quick else simulate(64, 7, Path(work))
        found, notes = figures(week)
    emit(found)
    if "--json" not in sys.argv[1:]:
        print("\n".join(notes))


if __name__ == "__main__":
    main()
