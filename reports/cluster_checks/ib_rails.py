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

from ...checks.finding import Action, Finding
from ..cluster import ClusterFinding
from ..summary import NodeSummary
from .common import by_profile, majority, minority_by_value, observed_sets, tagged

CHECK = "cluster.ib_rails"


def _compare(profile: str, gpu: int, rails: list[tuple[str, dict[str, Any]]], key: str,
             message: str, action: Action) -> ClusterFinding | None:
    values = [(node, rail.get(key)) for node, rail in rails if rail.get(key) is not None]
    if not values:
        return None
    common = majority(v for _, v in values)
    odd = minority_by_value(values, common)
    if not odd:
        return None
    return tagged(CHECK, Finding.fail(f"gpu{gpu} rail", message, observed_sets(odd), common,
                                      action), (n for group in odd.values() for n in group))


def ib_rails(nodes: Sequence[NodeSummary]) -> list[ClusterFinding]:
    findings: list[ClusterFinding] = []
    compared = 0
    for profile, members in sorted(by_profile(nodes).items()):
        per_gpu: dict[int, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
        for summary in members:
            for rail in summary.facts.rails:
                per_gpu[int(rail["gpu"])].append((summary.node, rail))
        for gpu, rails in sorted(per_gpu.items()):
            if len(rails) < 2:
                continue
            compared += 1
            for key, message, action in (
                    ("subnet", f"rail in another subnet than on the other {profile} nodes",
                     Action.INVESTIGATE),
                    ("rate_gbps", f"rail slower than on the other {profile} nodes",
                     Action.RESEAT_CABLE)):
                finding = _compare(profile, gpu, rails, key, message, action)
                if finding is not None:
                    findings.append(finding)
    if not compared:
        return [tagged(CHECK, Finding.skip(
            "cluster", "fewer than two nodes report InfiniBand rails per GPU"))]
    if not findings:
        findings.append(tagged(CHECK, Finding.passed(
            "cluster", "every GPU's rail in one subnet at one rate", compared)))
    return findings
