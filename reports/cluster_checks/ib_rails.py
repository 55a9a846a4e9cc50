"""cluster.ib_rails: the port serving GPU i is in the same subnet, at the same rate, on
every node of a profile.

NCCL's rail-optimised rings send GPU i's traffic over the NIC beside GPU i, to GPU i of
the other nodes; a rail plugged into another subnet, or trained to a lower rate, slows or
breaks every collective that crosses it. Rails are keyed by GPU index, not by device
name: mlx5 numbering differs between nodes of the same model.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ...checks.finding import Action, Finding, Status
from ..cluster import ClusterFinding
from ..summary import NodeSummary
from .common import by_profile, majority, minority_by_value, observed_sets, tagged

CHECK = "cluster.ib_rails"


def _compare(profile: str, gpu: int, rails: list[tuple[str, dict[str, Any]]], key: str,
             message: str, action: Action, known: set[str]) -> ClusterFinding | None:
    """``known``: nodes whose own report already failed this port for the same reason;
    they count towards the majority but are not reported twice."""
    values = [(node, rail.get(key)) for node, rail in rails if rail.get(key) is not None]
    if not values:
        return None
    common = majority(v for _, v in values)
    odd = minority_by_value([(n, v) for n, v in values if n not in known], common)
    if not odd:
        return None
    return tagged(CHECK, Finding.fail(f"gpu{gpu} rail", message, observed_sets(odd), common,
                                      action), (n for group in odd.values() for n in group))


def ib_rails(nodes: Sequence[NodeSummary]) -> list[ClusterFinding]:
    findings: list[ClusterFinding] = []
    compared = 0
    for profile, members in sorted(by_profile(nodes).items()):
        per_gpu: dict[int, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
        rate_failed = {s.node: {f.component for f in s.problems
                                if f.check == "ib.rate" and f.status is Status.FAIL}
                       for s in members}
        for summary in members:
            for rail in summary.facts.rails:
                per_gpu[int(rail["gpu"])].append((summary.node, rail))
        for gpu, rails in sorted(per_gpu.items()):
            if len(rails) < 2:
                continue
            compared += 1
            # A port the node's own ib.rate already failed is one problem, not two.
            slow = {node for node, rail in rails
                    if f"{rail['hca']}/{rail['port']}" in rate_failed.get(node, set())}
            for key, message, action, known in (
                    ("subnet", f"rail in another subnet than on the other {profile} nodes",
                     Action.INVESTIGATE, set()),
                    ("rate_gbps", f"rail slower than on the other {profile} nodes",
                     Action.RESEAT_CABLE, slow)):
                finding = _compare(profile, gpu, rails, key, message, action, known)
                if finding is not None:
                    findings.append(finding)
    if not compared:
        return [tagged(CHECK, Finding.skip(
            "cluster", "fewer than two nodes report InfiniBand rails per GPU"))]
    if not findings:
        findings.append(tagged(CHECK, Finding.passed(
            "cluster", "every GPU's rail in one subnet at one rate", compared)))
    return findings
