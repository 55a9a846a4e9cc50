"""The qualification report (schema clusterdiag/qualify-report/v1): a cluster report of the
same family — per-node summaries, problems grouped across nodes, ``bad_nodes`` as one folded
node set — plus what only an active run has: every figure with its expected value, floor,
source and the peers' median; each tool run (per file with ``--from-logs``); the repeats;
drift from a saved baseline; the drains.

What a reader is led by, at any size (``convictions``, ``outlier_tables``): each part that is
not ready or suspect with its figure, its peers' median, its expectation and source, and the
line its tool printed; and per test, the outliers and a count of the rest with their spread,
never a row per GPU of every node.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...agent.model.qualify import Expectation, ToolRun
from ...checks.core.finding import Action, Finding, Status, worst
from ...checks.qualify.cross import Graded, ScalingPoint
from ...checks.qualify.judge import Judged, component_kind
from .cluster import ClusterReport, fold
from .summary import STATUSES, NodeSummary

QUALIFY_SCHEMA = "clusterdiag/qualify-report/v1"
PROBLEMS = (Status.FAIL, Status.ERROR, Status.WARN)
_NOUNS = {"gpu": "GPUs", "rail": "rails", "node": "nodes", "pair": "GPU pairs"}
_SEVERITY = {Status.FAIL: 0, Status.ERROR: 1, Status.WARN: 2, Status.SKIP: 3, Status.PASS: 4}


def natural_key(name: str) -> list[tuple[int, int | str]]:
    """q2 before q10, as a node set folds them."""
    return [(0, int(part)) if part.isdigit() else (1, part)
            for part in re.split(r"(\d+)", name) if part]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


@dataclass(frozen=True)
class Conviction:
    """One part (a GPU, a rail, a node) that is not ready or suspect, as the reports lead
    with it: what it measured against its peers' median (or the expected figure where too
    few peers ran) and against the profile's expectation with its source, and the line its
    tool printed when the run itself failed."""

    node: str
    test: str  # the check id without ``qualify.``
    component: str
    status: Status
    action: Action
    message: str
    value: float | None = None
    unit: str = ""
    reference: float | None = None
    basis: str = ""  # "peers' median" or "expected"
    expected: float | None = None
    floor: float | None = None
    source: str = ""
    evidence: str = ""  # what the tool printed, or why it ended (hung, exited non-zero)

    @property
    def below_pct(self) -> float | None:
        if not self.reference or self.value is None:
            return None
        return 100.0 * (1.0 - self.value / self.reference)


@dataclass(frozen=True)
class Outlier:
    """One row of a per-test table: a figure (or a run between nodes) that is not a pass."""

    status: Status
    where: str  # the node, or the nodes of a run between nodes ("a – b")
    component: str
    value: float | None
    reference: float | None
    why: str
    run: str = ""  # for a run between nodes: its pass and round

    @property
    def below_pct(self) -> float | None:
        if not self.reference or self.value is None:
            return None
        return 100.0 * (1.0 - self.value / self.reference)


@dataclass
class OutlierTable:
    """One test: its outliers (worst first) and how many more passed, within what spread
    of the reference (the peers' median, or the expected figure)."""

    test: str
    unit: str
    noun: str  # "components", "pair runs", "rail runs", "rack runs"
    basis: str
    reference: float | None
    outliers: list[Outlier]
    rest: int
    low: float | None = None  # the rest's lowest and highest figure
    high: float | None = None
    expectation: Expectation | None = None

    @property
    def spread_pct(self) -> float | None:
        """How far from the reference the rest lie, at most, in percent."""
        if not self.reference or self.low is None or self.high is None:
            return None
        return 100.0 * max(abs(self.low / self.reference - 1), abs(self.high / self.reference
                                                                   - 1))


def _spread(values: Iterable[float]) -> tuple[float | None, float | None]:
    items = list(values)
    return (min(items), max(items)) if items else (None, None)


def node_summary(node: str, profile: str, version: str, gpus: int,
                 findings: list[Finding]) -> NodeSummary:
    counts = dict.fromkeys(STATUSES, 0)
    for f in findings:
        counts[f.status.value] += 1
    return NodeSummary(node=node, profile=profile, version=version,
                       verdict=worst(f.status for f in findings), gpus=gpus, counts=counts,
                       problems=[f for f in findings if f.status not in (Status.PASS,
                                                                         Status.SKIP)])


@dataclass
class QualifyReport:
    cluster: ClusterReport
    mode: str  # run | logs
    tests: list[str]
    level: str
    duration_s: float
    figures: list[Judged]
    runs: list[ToolRun]
    findings: Mapping[str, list[Finding]]
    repeated: list[tuple[str, str]] = field(default_factory=list)
    drift: list[dict[str, Any]] = field(default_factory=list)
    drained: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # The tests between nodes: every pair, rail and rack figure judged, the scaling curve,
    # the rounds of the schedule and how long they took (agent/qualify/cross.py).
    cross: list[Graded] = field(default_factory=list)
    scaling: list[ScalingPoint] = field(default_factory=list)
    schedule: dict[str, Any] = field(default_factory=dict)
    fail_pct: float = 10.0  # the straggler rule's fail line, drawn on the scaling curve

    @property
    def verdict(self) -> Status:
        return self.cluster.verdict

    @property
    def bad_nodes(self) -> list[str]:
        """The nodes a test convicted (a fail on the node): the ones to leave out. A node
        with only an error (a tool that could not run, our own deadline) is not ready but
        not convicted: it is in :attr:`unjudged`, never excluded or drained for it."""
        return [s.node for s in self.cluster.nodes if self.cluster.node_verdict(s) is Status.FAIL]

    @property
    def unjudged(self) -> list[str]:
        """Nodes not convicted whose tests could not all be judged (an error)."""
        return [s.node for s in self.cluster.nodes
                if self.cluster.node_verdict(s) is Status.ERROR]

    @property
    def ready(self) -> bool:
        return self.cluster.ready

    def stragglers(self) -> list[Judged]:
        return [j for j in self.figures if j.status is not Status.PASS]

    def convictions(self) -> list[Conviction]:
        """Every part with a fail, error or warning, worst first, then by node and test."""
        judged = {(j.figure.node, j.figure.test, j.figure.component): j for j in self.figures
                  if j.status is not Status.PASS}
        expected = {j.figure.test: j.expectation for j in self.figures if j.expectation}
        out = [_conviction(node, f, judged, expected) for node, own in self.findings.items()
               for f in own if f.status in PROBLEMS]
        return sorted(out, key=lambda c: (_SEVERITY[c.status], natural_key(c.node), c.test,
                                          natural_key(c.component)))

    def cluster_problems(self) -> list[Finding]:
        """The cluster-level findings that are not a pass (a curve that breaks, a test slow
        on every node, a slow pair no second pass could attribute), worst first."""
        found = [c.finding for c in self.cluster.findings if c.finding.status in PROBLEMS]
        return sorted(found, key=lambda f: _SEVERITY[f.status])

    def outlier_tables(self) -> list[OutlierTable]:
        """Per test of the node tests (per GPU, rail or node), then per test between nodes
        (per pair run): the figures that are not a pass and a count of the rest."""
        tables = []
        by_test: dict[str, list[Judged]] = defaultdict(list)
        for j in self.figures:
            by_test[j.figure.test].append(j)
        for test, items in sorted(by_test.items()):
            bad = sorted((j for j in items if j.status is not Status.PASS), key=lambda j: (
                _SEVERITY[j.status], j.figure.value / j.median if j.median else 0.0))
            rest = [j.figure.value for j in items if j.status is Status.PASS]
            medians = [j.median for j in items if j.median is not None]
            low, high = _spread(rest)
            kinds = {component_kind(j.figure.component) for j in items}
            noun = _NOUNS.get(kinds.pop(), "components") if len(kinds) == 1 else "components"
            tables.append(OutlierTable(
                test, items[0].figure.unit, noun, "peers' median" if medians else "",
                medians[0] if medians else None,
                [Outlier(j.status, j.figure.node, j.figure.component, j.figure.value, j.median,
                         j.why) for j in bad], len(rest), low, high,
                next((j.expectation for j in items if j.expectation), None)))
        cross: dict[str, list[Graded]] = defaultdict(list)
        for g in self.cross:
            cross[g.run.test].append(g)
        for test, graded in cross.items():
            bad_runs = sorted((g for g in graded if g.status is not Status.PASS), key=lambda g: (
                _SEVERITY[g.status], g.run.round, g.value if g.value is not None else 0.0))
            rest = [g.value for g in graded if g.status is Status.PASS and g.value is not None]
            low, high = _spread(rest)
            reference = next((g for g in graded if g.reference is not None), None)
            tables.append(OutlierTable(
                test, next((g.unit for g in graded if g.unit), ""),
                f"{test.removesuffix('s')} runs",
                reference.basis if reference else "",
                reference.reference if reference else None,
                [Outlier(g.status, " – ".join(g.run.nodes), g.component,
                         None if g.failed else g.value, g.reference, g.why,
                         f"{g.run.stage} pass, round {g.run.round}") for g in bad_runs],
                sum(1 for g in graded if g.status is Status.PASS), low, high))
        return tables

    def run_rows(self) -> list[dict[str, Any]]:
        """Per run (per file for saved logs): the tool, the figure it judged, the verdict."""
        rows = []
        for run in self.runs:
            own = [f for f in self.findings.get(run.node, [])
                   if f.check == f"qualify.{run.test}" or run.from_log]
            figures = [f for f in run.figures if f.test == run.test or run.test in (
                "nvbandwidth", "dcgm")]
            shown = min(figures, key=lambda f: f.value) if figures else None
            rows.append({"node": run.node, "test": run.test, "tool": run.tool,
                         "source": run.source[:300],
                         "figure": None if shown is None else {
                             "component": shown.component, "value": round(shown.value, 3),
                             "unit": shown.unit, "detail": shown.detail},
                         "verdict": worst(f.status for f in own).value,
                         "complete": run.complete, "seconds": round(run.seconds, 3),
                         "error": run.error, "skipped": run.skipped})
        ran = {run.node for run in self.runs}
        for node, own in sorted(self.findings.items()):
            if node not in ran and own:  # a file no parser read, a node with no GPUs
                rows.append({"node": node, "test": own[0].check.removeprefix("qualify."),
                             "tool": "unknown", "source": str(own[0].observed)[:300],
                             "figure": None, "verdict": worst(f.status for f in own).value,
                             "complete": False, "seconds": 0.0, "error": own[0].message,
                             "skipped": None})
        return rows

    def to_dict(self) -> dict[str, Any]:
        data = self.cluster.to_dict()
        data["schema"] = QUALIFY_SCHEMA
        data["bad_nodes"] = fold(self.bad_nodes)  # convicted only (see bad_nodes)
        data["unjudged_nodes"] = fold(self.unjudged)
        data["qualify"] = {
            "mode": self.mode, "level": self.level, "tests": self.tests,
            "duration_s": round(self.duration_s, 3),
            "figures": [j.to_dict() for j in self.figures],
            "runs": self.run_rows(),
            "repeated": [{"node": n, "test": t} for n, t in self.repeated],
            "drift": self.drift, "drained": self.drained, "notes": self.notes,
            "cross": {"figures": [g.to_dict() for g in self.cross],
                      "scaling": [p.to_dict() for p in self.scaling],
                      "schedule": self.schedule},
        }
        return data


def _conviction(node: str, f: Finding, judged: Mapping[tuple[str, str, str], Judged],
                expected: Mapping[str, Expectation | None]) -> Conviction:
    """A finding with the figure behind it: the judged figure of the same part where there
    is one, else what the finding itself carries (a run between nodes); a finding whose
    observed value is text is a run that failed, and that text is its evidence."""
    test = f.check.removeprefix("qualify.")
    j = judged.get((node, test, f.component))
    if j is not None:
        exp = j.expectation
        return Conviction(node, test, f.component, f.status, f.action, f.message,
                          j.figure.value, j.figure.unit, j.median,
                          "peers' median" if j.median is not None else "",
                          exp.expected if exp else None, exp.floor if exp else None,
                          exp.source if exp else "")
    observed = f.observed if isinstance(f.observed, dict) else {}
    wanted = f.expected if isinstance(f.expected, dict) else {}
    # The test's expectation only beside a figure (a run that failed has none to compare).
    exp = expected.get(test) if _number(observed.get("value")) is not None else None
    evidence = "" if isinstance(f.observed, (dict, list)) or f.observed is None \
        else str(f.observed)
    median = _number(wanted.get("peers_median"))
    reference = median if median is not None else _number(wanted.get("reference"))
    basis = "peers' median" if median is not None else str(wanted.get("basis") or "")
    return Conviction(
        node, test, f.component, f.status, f.action, f.message, _number(observed.get("value")),
        str(wanted.get("unit") or (exp.unit if exp else "")), reference,
        basis if reference is not None else "",
        _number(wanted.get("expected_value")) if "expected_value" in wanted
        else exp.expected if exp else None,
        _number(wanted.get("floor")) if "floor" in wanted else exp.floor if exp else None,
        str(wanted.get("source") or (exp.source if exp else "")), evidence)
