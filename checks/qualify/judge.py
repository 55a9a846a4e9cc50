"""Judging active tests: each figure against the platform's expected values and against
the node's peers, and the lines that fail a run whatever its bandwidth.

The straggler rule: a GPU, rail or node whose figure is more than ``fail_pct`` (default
10 %) below the median of the same test over the same components of every node of the
same profile is a ``fail``; more than ``warn_pct`` (5 %) below, a ``warn``. SuperBench's
fleet-baseline rules use the same two steps (-5 % in its docs example, -10 % in its v0.4
quick-scan rule file, microsoft/superbenchmark). A straggler is convicted only
by the best of two runs (the run and one repeat), so noise does not drain a node; a figure
that could not be repeated (a saved log) is at most a ``warn``. The floor of the profile
(a peer tool's threshold, with its source) fails a figure below it whatever the peers do.

Pure functions of plain data (``agent.model.qualify``): the same code judges a live run,
a simulated one and saved logs. One exception: :func:`judge` first takes every figure no
measurement can give out of its run, in place (sanity.py), so that no report holds it.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...agent.model.qualify import Expectation, Figure, ToolRun
from ..core.finding import Action, Finding, Status, worst
from ..profiles.profile import Profile
from .active import ACTIVE_TESTS, INVOCATIONS, Scope, served_by
from .sanity import screen

# What each test measures, in words a person reads in a finding (active.py), and the names
# of what a run may stand for that is no test of its own: nvbandwidth's run serves four
# tests; a saved nccl-tests log of another collective is judged as "collective".
TEST_NAMES = {**{t.id: t.summary for t in ACTIVE_TESTS.values()},
              "nvbandwidth": "nvbandwidth copy tests",
              "collective": "nccl-tests collective bus bandwidth"}
# The figures each run yields, where it is not its own test's alone.
RUN_TESTS = {invocation.name: tuple(t.id for t in served_by(invocation))
             for invocation in INVOCATIONS.values()
             if [t.id for t in served_by(invocation)] != [invocation.name]}
RUN_TESTS["dcgm"] = ()  # pass/fail per plugin; a PCIe figure DCGM prints is shown, not judged
COLLECTIVES = tuple(t.id for t in ACTIVE_TESTS.values()
                    if t.scope is Scope.NODE and t.invocation.parser == "nccl-tests")
# The catalog of qualify check ids, with what a failure asks for.
CATALOG: dict[str, Action] = {t.check_id: t.action for t in ACTIVE_TESTS.values()}
CATALOG["qualify.nvbandwidth"] = Action.DRAIN  # the run failed before any copy figure
CATALOG["qualify.collective"] = Action.DRAIN
CATALOG["qualify.logs"] = Action.INVESTIGATE  # a saved log qualify cannot read
# Tools whose output is judged by its lines, not a figure: dcgmi diag's pass/fail per plugin,
# an NCCL log (NCCL's own lines without nccl-tests' table).
FIGURELESS = ("dcgmi", "nccl")
CATALOG["qualify.inventory"] = Action.INVESTIGATE  # the node's GPUs could not be listed
# A peer group: profile, test, kind of part, tool. The fleet's medians by it are peers
# from outside the run (agent/qualify/medians.py): what a node judged alone is held to.
FleetKey = tuple[str, str, str, str]


@dataclass(frozen=True)
class StragglerRule:
    warn_pct: float = 5.0
    fail_pct: float = 10.0
    min_peers: int = 3  # fewer figures than this give no median worth comparing to

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> StragglerRule:
        return cls(float(section.get("warn_pct", 5.0)), float(section.get("fail_pct", 10.0)),
                   int(section.get("min_peers", 3)))


@dataclass
class Judged:
    """One figure as the report shows it: with its expectation and its peers' median."""

    figure: Figure
    profile: str
    status: Status = Status.PASS
    median: float | None = None
    peers: int = 0
    expectation: Expectation | None = None
    why: str = ""
    fleet_median: float | None = None  # the fleet's recent median, where one was given

    @property
    def deficit_pct(self) -> float | None:
        if not self.median:
            return None
        return 100.0 * (1.0 - self.figure.value / self.median)

    @property
    def fleet_deficit_pct(self) -> float | None:
        if not self.fleet_median:
            return None
        return 100.0 * (1.0 - self.figure.value / self.fleet_median)

    def to_dict(self) -> dict[str, Any]:
        exp = self.expectation
        deficit = self.deficit_pct
        return {**self.figure.to_dict(), "profile": self.profile, "status": self.status.value,
                "peers_median": None if self.median is None else round(self.median, 3),
                "peers": self.peers,
                "below_median_pct": None if deficit is None else round(deficit, 2),
                "expected": None if exp is None else exp.expected,
                "floor": None if exp is None else exp.floor,
                "source": None if exp is None else exp.source, "why": self.why}


@dataclass
class Judgement:
    findings: dict[str, list[Finding]] = field(default_factory=dict)
    figures: list[Judged] = field(default_factory=list)
    cluster: list[Finding] = field(default_factory=list)  # the cluster's as a whole


def expectations(profile: Profile) -> dict[str, Expectation]:
    """The profile's ``qualify`` data as Expectations (units and sources kept)."""
    out = {}
    for test, item in profile.qualify.items():
        out[test] = Expectation(test, str(item.get("unit", "")), str(item.get("source", "")),
                                number(item.get("expected")), number(item.get("floor")))
    return out


def number(value: Any) -> float | None:
    """A JSON number as a float; None for anything else (a bool is not a number)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def component_kind(component: str) -> str:
    if component.startswith("gpu") and "-" in component:
        return "pair"
    if component.startswith("gpu"):
        return "gpu"
    return "node" if component == "node" else "rail"


def per_gpu_d2d(figures: Iterable[Figure]) -> list[Figure]:
    """A GPU's device-to-device figure: the median of every pair it is in (both ways), per
    run. One slow GPU is in all of its own pairs but in only two of each other GPU's, so
    the median names it and not its partners."""
    by_gpu: dict[tuple[str, str], list[Figure]] = defaultdict(list)
    for f in figures:
        for gpu in f.component.split("-", 1):
            by_gpu[(f.node, gpu)].append(f)
    out = []
    for (node, gpu), pairs in sorted(by_gpu.items()):
        runs = min(len(f.values) for f in pairs)
        values = [statistics.median(f.values[k] for f in pairs) for k in range(runs)]
        out.append(Figure(node, "d2d", gpu, values, "GB/s", pairs[0].tool,
                          f"median of its {len(pairs)} pair figures"))
    return out


def figures_of(run: ToolRun) -> list[Figure]:
    """The figures a run is judged on: those of its own test(s)."""
    tests = RUN_TESTS.get(run.test, (run.test,))
    return [f for f in run.figures if f.test in tests]


def judged_figures(runs: Iterable[ToolRun]) -> list[Figure]:
    """The figures the rule looks at: pairs folded into per-GPU d2d figures."""
    figures = [f for run in runs for f in figures_of(run)]
    is_pair = [f.test == "d2d" and component_kind(f.component) == "pair" for f in figures]
    return [f for f, pair in zip(figures, is_pair, strict=True) if not pair] + \
        per_gpu_d2d([f for f, pair in zip(figures, is_pair, strict=True) if pair])


def _peer_key(f: Figure, profiles: Mapping[str, str]) -> FleetKey:
    return profiles.get(f.node, ""), f.test, component_kind(f.component), f.tool


def grade(figures: list[Figure], profiles: Mapping[str, str],
          expect: Mapping[str, Mapping[str, Expectation]], rule: StragglerRule,
          fleet: Mapping[FleetKey, float] | None = None) -> list[Judged]:
    """Each figure's status under the floor and the straggler rule (before confirmation).
    In a peer group that is slow as a whole (``uniformly_slow``) the floor convicts nobody:
    the group is one cluster-level finding, and its members are judged against each other.
    ``fleet`` holds medians of the same groups measured elsewhere: a figure is held to its
    group's by the same rule, so a node whose every part is slow alike (its own median
    hides it) is still found."""
    groups: dict[FleetKey, list[float]] = defaultdict(list)
    for f in figures:
        groups[_peer_key(f, profiles)].append(f.value)
    medians = {key: statistics.median(values) for key, values in groups.items()
               if len(values) >= rule.min_peers}
    out = []
    for f in figures:
        profile = profiles.get(f.node, "")
        key = _peer_key(f, profiles)
        item = Judged(f, profile, expectation=expect.get(profile, {}).get(f.test),
                      peers=len(groups[key]), median=medians.get(key),
                      fleet_median=(fleet or {}).get(key))
        floor = item.expectation.floor if item.expectation else None
        if short_of_profile(item.median, item.expectation, rule) is not None:
            floor = None
        deficit = item.deficit_pct
        if floor is not None and f.value < floor:
            item.status, item.why = Status.FAIL, "below the profile's floor"
        elif deficit is not None and deficit > rule.fail_pct:
            item.status, item.why = Status.FAIL, f"more than {rule.fail_pct:g} % below peers"
        elif deficit is not None and deficit > rule.warn_pct:
            item.status, item.why = Status.WARN, f"more than {rule.warn_pct:g} % below peers"
        _against_fleet(item, rule)
        out.append(item)
    return out


def _against_fleet(item: Judged, rule: StragglerRule) -> None:
    """The straggler rule once more, against the fleet's median: the worse verdict stands."""
    deficit = item.fleet_deficit_pct
    if deficit is None or item.status is Status.FAIL:
        return
    if deficit > rule.fail_pct:
        item.status = Status.FAIL
        item.why = f"more than {rule.fail_pct:g} % below the fleet's median"
    elif deficit > rule.warn_pct and item.status is Status.PASS:
        item.status = Status.WARN
        item.why = f"more than {rule.warn_pct:g} % below the fleet's median"


def short_of_profile(median: float | None, exp: Expectation | None, rule: StragglerRule
                     ) -> str | None:
    """How a peer group's median falls short of its profile, or None: below the floor, or
    more than ``fail_pct`` below the expected figure."""
    if median is None or exp is None:
        return None
    if exp.floor is not None and median < exp.floor:
        return f"below the profile's floor {exp.floor:g}"
    if exp.expected is not None and median < exp.expected * (1 - rule.fail_pct / 100):
        return f"{100 * (1 - median / exp.expected):.1f} % below the expected {exp.expected:g}"
    return None


def uniformly_slow(judged: Iterable[Judged], rule: StragglerRule) -> list[Finding]:
    """One cluster-level fail per peer group (a profile's nodes, one test, one kind of
    part) whose median falls short of the profile: the whole cluster is slow there (a
    setting, a driver, a firmware, or an expectation that does not hold), which draining
    every node would not mend; the figure, the expectation and its source say so."""
    seen: dict[tuple[str, str, str], Judged] = {}
    for j in judged:
        seen.setdefault((j.profile, j.figure.test, component_kind(j.figure.component)), j)
    out = []
    for (profile, test, kind), j in sorted(seen.items()):
        why = short_of_profile(j.median, j.expectation, rule)
        if why is None or j.expectation is None or j.median is None:
            continue
        exp = j.expectation
        out.append(Finding(
            Status.FAIL, "cluster",
            f"{TEST_NAMES.get(test, test)}: the {profile or 'unprofiled'} nodes are slow as a "
            f"whole, their median {j.median:.1f} {j.figure.unit} per {kind} {why}",
            {"median": round(j.median, 2), "figures": j.peers, "unit": j.figure.unit},
            {"expected": exp.expected, "floor": exp.floor, "source": exp.source},
            Action.INVESTIGATE, f"qualify.{test}"))
    return out


def suspects(judged: Iterable[Judged]) -> set[tuple[str, str, str]]:
    """(node, test, component) of the figures to measure once more before anything is
    convicted."""
    return {(j.figure.node, j.figure.test, j.figure.component) for j in judged
            if j.status is not Status.PASS and len(j.figure.values) < 2}


def needs_repeat(run: ToolRun, wanted: set[tuple[str, str, str]]) -> bool:
    """Whether one of the run's figures (or a pair holding a suspect GPU) is wanted."""
    return any((run.node, f.test, part) in wanted for f in figures_of(run)
               for part in {f.component, *f.component.split("-", 1)})


def _action(test: str, status: Status) -> Action:
    if status is Status.WARN:
        return Action.INVESTIGATE
    return CATALOG[f"qualify.{test}"]


def _figure_finding(j: Judged, repeatable: bool) -> Finding:
    f = j.figure
    status = j.status
    confirmed = len(f.values) > 1
    note = ""
    if status is not Status.PASS and not confirmed:
        note = " (not confirmed: a saved log cannot be repeated)" if not repeatable \
            else " (not confirmed: the repeat did not run)"
        status = Status.WARN
    exp = j.expectation
    expected: dict[str, Any] = {"peers_median": None if j.median is None else round(j.median, 2),
                                "unit": f.unit}
    if j.fleet_median is not None:
        expected["fleet_median"] = round(j.fleet_median, 2)
    if exp is not None:
        expected.update(expected_value=exp.expected, floor=exp.floor, source=exp.source)
    observed = {"value": round(f.value, 2), "runs": [round(v, 2) for v in f.values]}
    name = TEST_NAMES.get(f.test, f.test)
    message = f"{name} {j.why}{note}"
    return Finding(status, f.component, message, observed, expected, _action(f.test, status),
                   f"qualify.{f.test}")


def _evidence_findings(run: ToolRun) -> list[Finding]:
    check = f"qualify.{run.test}"
    out = []
    for e in run.evidence:
        if e.kind == "error":
            out.append(Finding(Status.ERROR, e.component, f"{run.tool} could not run the test "
                               "as asked", e.text, None, Action.INVESTIGATE, check))
        elif e.kind == "setup":  # the tool's build or installation, not the node
            out.append(Finding(Status.ERROR, e.component, f"{run.tool} is not installed as "
                               "the test needs", e.text, None, Action.FIX_CONFIG, check))
        elif e.kind == "impossible":  # checks/qualify/sanity.py
            out.append(Finding(Status.ERROR, e.component, f"{run.tool} printed a figure no "
                               "measurement can give", e.text, "a possible figure",
                               Action.INVESTIGATE, f"qualify.{e.test or run.test}"))
        elif e.kind == "fail":
            out.append(Finding(Status.FAIL, e.component, f"{run.tool} reported a failure",
                               e.text, "no failure lines", Action.DRAIN, check))
        elif e.kind == "config_fail":
            out.append(Finding(Status.FAIL, e.component, f"{run.tool} failed a set-up test",
                               e.text, "pass", Action.FIX_CONFIG, check))
        elif e.kind == "socket":
            out.append(Finding(Status.FAIL, e.component,
                               "NCCL used the Socket transport instead of InfiniBand", e.text,
                               "NET/IB", Action.FIX_CONFIG, check))
        elif e.kind == "warn" and run.tool != "dcgmi":
            out.append(Finding(Status.WARN, e.component, f"{run.tool} printed a warning",
                               e.text, None, Action.INVESTIGATE, check))
        elif e.kind == "warn":
            out.append(Finding(Status.WARN, e.component, f"{e.test}: DCGM warned", e.text,
                               "pass", Action.INVESTIGATE, check))
    return out


def run_findings(run: ToolRun) -> list[Finding]:
    """What the run itself says, apart from its figures: it could not run, it hung, it
    printed a failure, it ended without its summary."""
    check = f"qualify.{run.test}"
    if run.skipped is not None:
        return [Finding(Status.SKIP, "node", f"{run.tool} is not installed", run.skipped, None,
                        Action.NONE, check)]
    if run.hung:
        return [Finding(Status.FAIL, "node", f"{run.tool} hung: killed at its deadline",
                        run.error, "an exit within the deadline", Action.DRAIN, check)]
    if run.error is not None and not run.from_log:
        return [Finding(Status.ERROR, "node", f"{run.tool} could not run", run.error, None,
                        Action.INVESTIGATE, check)]
    findings = _evidence_findings(run)
    if any(f.status in (Status.FAIL, Status.ERROR) for f in findings):
        return findings
    if run.returncode not in (0, None):  # no failure of the hardware in what it printed
        findings.append(Finding(Status.ERROR, "node",
                                f"{run.tool} exited with {run.returncode} and printed no "
                                "failure of the hardware (a launcher, a library, a usage "
                                "error: its last lines say which)",
                                "; ".join(run.notes) or run.returncode, 0, Action.INVESTIGATE,
                                check))
    elif not run.complete:
        status = Status.ERROR if run.from_log else Status.FAIL
        findings.append(Finding(status, "node",
                                f"{run.tool} output ends before its summary (crashed, hung or "
                                f"cut short)", "; ".join(run.notes) or None,
                                "the tool's closing lines", Action.INVESTIGATE, check))
    elif not run.figures and run.tool not in FIGURELESS:
        findings.append(Finding(Status.ERROR, "node", f"{run.tool} printed no figure",
                                "; ".join(run.notes) or None, "a result", Action.INVESTIGATE,
                                check))
    return findings


def _names_process(component: str) -> bool:
    """Whether the component is an NCCL process (``rank R on HOST GPU D``, ``HOST pid P GPU
    D``: a log's line, agent/qualify/parsers/nccl.py) rather than a part of the node: what
    that process printed is its own finding, not what slowed a collective."""
    return component.startswith("rank ") or " pid " in component


def _attribute(findings: list[Finding]) -> list[Finding]:
    """A node-wide collective that is slow where one GPU or rail of the same node is a
    straggler names that part: the ring is only as fast as its slowest member."""
    parts = sorted({f.component for f in findings if f.status in (Status.FAIL, Status.WARN)
                    and f.component != "node" and f.check != "qualify.dcgm"
                    and not _names_process(f.component)})
    if not parts:
        return findings
    out = []
    for f in findings:
        if f.component == "node" and f.check.removeprefix("qualify.") in COLLECTIVES \
                and f.status in (Status.FAIL, Status.WARN):
            f = Finding(f.status, ",".join(parts), f"{f.message}; slowed by {', '.join(parts)}",
                        f.observed, f.expected, f.action, f.check)
        out.append(f)
    return out


def judge(runs: list[ToolRun], profiles: Mapping[str, str],
          expect: Mapping[str, Mapping[str, Expectation]], rule: StragglerRule,
          repeatable: bool = True, fleet: Mapping[FleetKey, float] | None = None
          ) -> Judgement:
    """Findings per node (every test that ran yields at least one) and the judged figures.
    ``runs`` holds each (node, test) once, with a repeat's figures already merged in;
    ``fleet``: the fleet's medians by peer group, judged against as well (``grade``)."""
    result = Judgement()
    screen(runs, profiles, expect)  # impossible figures become errors, never judged
    figures = judged_figures(runs)
    graded = grade(figures, profiles, expect, rule, fleet)
    result.figures = graded
    result.cluster = uniformly_slow(graded, rule)
    by_test: dict[tuple[str, str], list[Judged]] = defaultdict(list)
    for j in graded:
        by_test[(j.figure.node, j.figure.test)].append(j)
    for run in runs:
        own = run_findings(run)
        known_cause = any(f.status is Status.FAIL for f in own)
        mine = [j for test in RUN_TESTS.get(run.test, (run.test,))
                for j in by_test.pop((run.node, test), [])]
        for j in mine:
            if j.status is not Status.PASS and not known_cause:
                own.append(_figure_finding(j, repeatable))
        own.extend(_passes(run, mine, own))
        result.findings.setdefault(run.node, []).extend(own)
    for node, findings in result.findings.items():
        result.findings[node] = _attribute(findings)
    return result


def _passes(run: ToolRun, mine: list[Judged], own: list[Finding]) -> list[Finding]:
    """One pass per test of the run with nothing wrong, naming its lowest figure."""
    if any(f.status in (Status.SKIP, Status.ERROR) or
           (f.status is Status.FAIL and f.component == "node") for f in own):
        return []
    troubled = {f.check for f in own if f.status is not Status.PASS}
    by_test: dict[str, list[Judged]] = defaultdict(list)
    for j in mine:
        by_test[j.figure.test].append(j)
    out = []
    for test, items in sorted(by_test.items()):
        if f"qualify.{test}" in troubled:
            continue
        low = min(items, key=lambda j: j.figure.value)
        out.append(Finding(
            Status.PASS, "node", f"{TEST_NAMES.get(test, test)} as expected",
            {"lowest": round(low.figure.value, 2), "component": low.figure.component,
             "figures": len(items)},
            {"peers_median": None if low.median is None else round(low.median, 2),
             "floor": low.expectation.floor if low.expectation else None,
             "unit": low.figure.unit}, Action.NONE, f"qualify.{test}"))
    if not by_test and not troubled:
        passed = sum(1 for e in run.evidence if e.kind == "pass")
        skipped = sum(1 for e in run.evidence if e.kind == "skip")
        out.append(Finding(Status.PASS, "node", f"{run.tool}: nothing failed",
                           {"pass": passed, "skip": skipped}, None, Action.NONE,
                           f"qualify.{run.test}"))
    return out


def verdict(findings: Iterable[Finding]) -> Status:
    return worst(f.status for f in findings)
