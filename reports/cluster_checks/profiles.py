"""cluster.profiles: the nodes of one set run on one platform profile.

Nodes named alike (``gpu[001-128]``) are bought, racked and scheduled as one partition; a
node among them that detects as another platform (a different GPU SKU, or ``generic``
because detection failed) will not give the job what its siblings give. Sets are the
name patterns ClusterShell folds a node list into (digits are the ranges).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from ...checks.core.finding import Action, Finding
from ..model.cluster import ClusterFinding
from ..model.summary import NodeSummary
from .common import majority, minority_by_value, observed_sets, tagged

CHECK = "cluster.profiles"


_DIGITS = re.compile(r"[0-9]+")


def node_sets(names: Sequence[str]) -> list[list[str]]:
    sets: dict[str, list[str]] = defaultdict(list)
    for name in names:
        sets[_DIGITS.sub("%s", name)].append(name)
    return [sets[pattern] for pattern in sorted(sets)]


def profiles(nodes: Sequence[NodeSummary]) -> list[ClusterFinding]:
    answered = {s.node: s.profile for s in nodes if s.answered}
    findings: list[ClusterFinding] = []
    for members in node_sets(sorted(answered)):
        values = [(node, answered[node]) for node in members]
        common = majority(v for _, v in values)
        odd = minority_by_value(values, common)
        if odd:
            findings.append(tagged(CHECK, Finding.warn(
                "node", "node runs another platform profile than its node set",
                observed_sets(odd), common, Action.INVESTIGATE),
                (n for group in odd.values() for n in group)))
    if not findings:
        findings.append(tagged(CHECK, Finding.passed("cluster", "each node set on one profile")))
    return findings
