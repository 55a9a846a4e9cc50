"""cluster.reachability: every node asked gave a report we read, and every file given
is one; otherwise the reason, grouped so a hundred dead nodes make one line.

A node that is silent, answers garbage or speaks another schema version is a fail: the
job must not land on a node nobody could vouch for. A node the gather never asked (its
own deadline passed first) is an error: nothing is known against the node, so it is
unjudged, not excluded (reports/model/cluster.py). A file that is not a node report
names the file and no node, since nothing in it says which node it was meant to be.
A file left out on purpose (``report merge`` given an older report of a node it also has
a newer one of) is a warn naming the file: nothing is wrong with the node, but the
operator should know which report was not used.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ...checks.core.finding import Action, Finding, Status
from ..model.cluster import ClusterFinding, fold
from .common import tagged

CHECK = "cluster.reachability"


@dataclass(frozen=True)
class Unreachable:
    """One node or file we got no usable report from, and why (stable text)."""

    reason: str
    node: str | None = None  # None: a file that does not say which node it is
    file: str | None = None
    # WARN: a file left out on purpose, the node is reported; ERROR: a node never asked.
    status: Status = Status.FAIL


def reachability(failures: Sequence[Unreachable], asked: int) -> list[ClusterFinding]:
    by_reason: dict[tuple[str, Status], list[Unreachable]] = defaultdict(list)
    for failure in failures:
        by_reason[failure.reason, failure.status].append(failure)
    findings: list[ClusterFinding] = []
    for (reason, status), items in sorted(by_reason.items()):
        nodes = [f.node for f in items if f.node is not None]
        files = sorted(f.file for f in items if f.file is not None)
        observed = ({"nodes": fold(nodes)} if nodes else {}) | ({"files": files} if files else {})
        findings.append(tagged(CHECK, Finding(
            status, "node" if nodes else "file", reason, observed, "a node report",
            Action.INVESTIGATE), nodes))
    if not any(f.finding.status in (Status.FAIL, Status.ERROR) for f in findings):
        findings.append(tagged(CHECK, Finding.passed(
            "cluster", "every node answered with a report", asked)))
    return findings
