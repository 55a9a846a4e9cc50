"""The cluster report (schema clusterdiag/cluster-report/v1): every output renders this.

It answers the operator's two questions at once: is the cluster ready for the job, and if
not, which nodes to leave out (``bad_nodes``, one folded node set for ``sbatch --exclude=``)
and what to fix (problems grouped by check and message across nodes, the way ClusterShell
groups identical output, most severe first).
"""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ClusterShell.NodeSet import NodeSet, NodeSetException

from ...checks.core.finding import Action, Finding, Status, worst
from .summary import NOT_READY, STATUSES, NodeSummary

CLUSTER_SCHEMA = "clusterdiag/cluster-report/v1"
_SEVERITY = {Status.FAIL: 0, Status.ERROR: 1, Status.WARN: 2, Status.PASS: 3, Status.SKIP: 4}


# What ClusterShell can fold and unfold as it was: a host name's characters. Anything else
# ("run[a].log", "x,y.log", a saved log's name under --from-logs) would be read as a range,
# a list or a group, or refused.
_HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def fold(nodes: Iterable[str]) -> str:
    """The names as one node set (``n[1-4]``): host names folded, any other name after
    them verbatim, so that a name is never misread or refused."""
    names = sorted(set(nodes))
    hosts = [n for n in names if _HOST_NAME.match(n)]
    others = [n for n in names if not _HOST_NAME.match(n)]
    try:
        folded = [str(NodeSet.fromlist(hosts))] if hosts else []
    except NodeSetException:
        folded, others = [], names
    return ",".join(folded + others)


@dataclass(frozen=True)
class ClusterFinding:
    """A cross-node judgement and the nodes it concerns (empty: the cluster as a whole)."""

    finding: Finding
    nodes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {**self.finding.to_dict(), "nodes": fold(self.nodes)}


@dataclass
class ProblemGroup:
    check: str
    status: Status
    message: str
    action: Action
    nodes: list[str] = field(default_factory=list)
    components: set[str] = field(default_factory=set)

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "status": self.status.value, "message": self.message,
                "action": self.action.value, "nodes": fold(self.nodes),
                "node_count": len(set(self.nodes)), "components": sorted(self.components)}


@dataclass
class ClusterReport:
    nodes: list[NodeSummary]
    findings: list[ClusterFinding]
    version: str
    via: str
    need: int | None = None
    generated_at: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc)
                              .isoformat(timespec="seconds"))

    def __post_init__(self) -> None:
        self.nodes.sort(key=lambda s: s.node)
        self._by_node: dict[str, list[ClusterFinding]] = defaultdict(list)
        for item in self.findings:
            for node in item.nodes:
                self._by_node[node].append(item)

    def cluster_findings_for(self, node: str) -> list[ClusterFinding]:
        return self._by_node.get(node, [])

    def node_verdict(self, summary: NodeSummary) -> Status:
        """The node's own verdict made worse by any cross-node finding that names it; a
        node with no report is what cluster.reachability says of it (a fail when it was
        asked, an error when it never was), a fail where nothing says."""
        cross = [c.finding.status for c in self.cluster_findings_for(summary.node)]
        if not summary.answered:
            return worst(cross) if cross else Status.FAIL
        return worst([summary.verdict, *cross])

    @property
    def bad_nodes(self) -> list[str]:
        """Nodes with a fail, or an error (a node we could not judge is not ready), but
        not the :attr:`unjudged`."""
        unjudged = set(self.unjudged)
        return [s.node for s in self.nodes
                if self.node_verdict(s) in NOT_READY and s.node not in unjudged]

    @property
    def unjudged(self) -> list[str]:
        """Nodes the gather never asked (its own deadline passed first): no report and an
        error, nothing known against them. Not ready, so the cluster is not ready, but
        never excluded: the trouble is clusterdiag's, not the node's."""
        return [s.node for s in self.nodes
                if not s.answered and self.node_verdict(s) is Status.ERROR]

    @property
    def ready_nodes(self) -> list[str]:
        return [s.node for s in self.nodes if self.node_verdict(s) not in NOT_READY]

    @property
    def unreachable(self) -> list[str]:
        return [s.node for s in self.nodes if not s.answered]

    @property
    def cluster_blockers(self) -> list[ClusterFinding]:
        """Cluster findings that fail without naming a node to leave out (a missing tray)."""
        return [c for c in self.findings if c.finding.status in NOT_READY and not c.nodes]

    @property
    def ready(self) -> bool:
        if self.need is not None:  # the job runs on the ready nodes; the rest are excluded
            return len(self.ready_nodes) >= self.need
        return not self.bad_nodes and not self.unjudged and not self.cluster_blockers

    @property
    def verdict(self) -> Status:
        statuses = [self.node_verdict(s) for s in self.nodes]
        return worst([*statuses, *(c.finding.status for c in self.findings)])

    def gpu_counts(self) -> tuple[int, int]:
        ready = set(self.ready_nodes)
        return sum(s.gpus for s in self.nodes), sum(s.gpus for s in self.nodes if s.node in ready)

    def finding_counts(self) -> dict[str, int]:
        totals = dict.fromkeys(STATUSES, 0)
        for summary in self.nodes:
            for status, count in summary.counts.items():
                totals[status] = totals.get(status, 0) + count
        for item in self.findings:
            totals[item.finding.status.value] += 1
        return totals

    def groups(self) -> list[ProblemGroup]:
        """Problems grouped by (check, message) across nodes, most severe first."""
        groups: dict[tuple[str, str], ProblemGroup] = {}

        def add(f: Finding, nodes: Iterable[str]) -> None:
            key = (f.check, f.message)
            group = groups.get(key)
            if group is None:
                group = groups[key] = ProblemGroup(f.check, f.status, f.message, f.action)
            elif _SEVERITY[f.status] < _SEVERITY[group.status]:
                group.status, group.action = f.status, f.action
            group.nodes.extend(nodes)
            group.components.add(f.component)

        for summary in self.nodes:
            for f in summary.problems:
                add(f, (summary.node,))
        for item in self.findings:
            if item.finding.status in (Status.FAIL, Status.ERROR, Status.WARN):
                add(item.finding, item.nodes)
        return sorted(groups.values(), key=lambda g: (_SEVERITY[g.status],
                                                       -len(set(g.nodes)), g.check, g.message))

    def to_dict(self) -> dict[str, Any]:
        gpus, gpus_ready = self.gpu_counts()
        return {
            "schema": CLUSTER_SCHEMA,
            "version": self.version,
            "generated_at": self.generated_at,
            "via": self.via,
            "ready": self.ready,
            "verdict": self.verdict.value,
            "need": self.need,
            "counts": {"nodes": len(self.nodes), "nodes_ready": len(self.ready_nodes),
                       "gpus": gpus, "gpus_ready": gpus_ready,
                       "findings": self.finding_counts()},
            "bad_nodes": fold(self.bad_nodes),
            "unjudged_nodes": fold(self.unjudged),
            "unreachable": fold(self.unreachable),
            "groups": [g.to_dict() for g in self.groups()],
            "cluster_findings": [c.to_dict() for c in self.findings],
            "nodes": [{**s.to_dict(), "verdict": self.node_verdict(s).value}
                      for s in self.nodes],
        }
