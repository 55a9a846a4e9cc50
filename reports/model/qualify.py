"""The qualification report (schema clusterdiag/qualify-report/v1): a cluster report of the
same family — per-node summaries, problems grouped across nodes, ``bad_nodes`` as one folded
node set — plus what only an active run has: every figure with its expected value, floor,
source and the peers' median; each tool run (per file with ``--from-logs``); the repeats;
drift from a saved baseline; the drains.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...agent.model.qualify import ToolRun
from ...checks.core.finding import Finding, Status, worst
from ...checks.qualify.cross import Graded, ScalingPoint
from ...checks.qualify.judge import Judged
from .cluster import ClusterReport
from .summary import STATUSES, NodeSummary

QUALIFY_SCHEMA = "clusterdiag/qualify-report/v1"


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
        return self.cluster.bad_nodes

    @property
    def ready(self) -> bool:
        return self.cluster.ready

    def stragglers(self) -> list[Judged]:
        return [j for j in self.figures if j.status is not Status.PASS]

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
