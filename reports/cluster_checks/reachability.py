"""cluster.reachability: every node asked gave a report we read, and every file given
is one; otherwise the reason, grouped so a hundred dead nodes make one line.

A node that is silent, answers garbage or speaks another schema version is a fail: the
job must not land on a node nobody could vouch for. A file that is not a node report
names the file and no node, since nothing in it says which node it was meant to be.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ...checks.finding import Action, Finding
from ..cluster import ClusterFinding, fold
from .common import tagged

CHECK = "cluster.reachability"


@dataclass(frozen=True)
class Unreachable:
    """One node or file we got no usable report from, and why (stable text)."""

    reason: str
    node: str | None = None  # None: a file that does not say which node it is
    file: str | None = None


def reachability(failures: Sequence[Unreachable], asked: int) -> list[ClusterFinding]:
    by_reason: dict[str, list[Unreachable]] = defaultdict(list)
    for failure in failures:
        by_reason[failure.reason].append(failure)
    findings: list[ClusterFinding] = []
    for reason, items in sorted(by_reason.items()):
        nodes = [f.node for f in items if f.node is not None]
        files = sorted(f.file for f in items if f.file is not None)
        observed = ({"nodes": fold(nodes)} if nodes else {}) | ({"files": files} if files else {})
        findings.append(tagged(CHECK, Finding.fail(
            "node" if nodes else "file", reason, observed, "a node report",
            Action.INVESTIGATE), nodes))
    if not findings:
        findings.append(tagged(CHECK, Finding.passed(
            "cluster", "every node answered with a report", asked)))
    return findings
