"""cluster.ib_rails: the port serving GPU i is in the same subnet, at the same rate, on
every node of a profile.

NCCL's rail-optimised rings send GPU i's traffic over the NIC beside GPU i, to GPU i of
the other nodes; a rail plugged into another subnet, or trained to a lower rate, slows or
breaks every collective that crosses it. Rails are keyed by GPU index, not by device
name: mlx5 numbering differs between nodes of the same model.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from ...checks.core.finding import Action, Finding, Status
from ..model.cluster import ClusterFinding
from ..model.summary import NodeSummary
from .common import by_profile, majority, minority_by_value, observed_sets, tagged

CHECK = "cluster.ib_rails"


def _slow(gpu: int, rails: list[tuple[str, dict[str, Any]]], profile: str,
          known: set[str]) -> ClusterFinding | None:
    """Rails below the rate most nodes run. A faster rail is never the problem, and a tie
    between two rates counts for the faster one, so the slower side is named. One node
    reporting an absurd rate moves nothing: the most common rate is the reference, not
    the highest. ``known``: nodes whose own ib.rate already failed this port; they are
    not reported twice."""
    rates = [(node, float(rail["rate_gbps"])) for node, rail in rails
             if isinstance(rail.get("rate_gbps"), (int, float))]
    if not rates:
        return None
    counts = Counter(rate for _, rate in rates)
    common = max(counts, key=lambda rate: (counts[rate], rate))
    odd = minority_by_value([(n, r) for n, r in rates if n not in known and r < common],
                            common)
    if not odd:
        return None
    return tagged(CHECK, Finding.fail(f"gpu{gpu} rail",
                                      f"rail slower than on the other {profile} nodes",
                                      observed_sets(odd, lambda r: f"{r:g} Gb/s"),
                                      f"{common:g} Gb/s", Action.RESEAT_CABLE),
                  (n for group in odd.values() for n in group))


def _subnets(gpu: int, rails: list[tuple[str, dict[str, Any]]], profile: str
             ) -> ClusterFinding | None:
    """The odd subnet fails when most nodes agree; with no majority there is no telling
    which side is wrong, so it is a warning naming both and excluding neither."""
    values = [(node, rail["subnet"]) for node, rail in rails if rail.get("subnet") is not None]
    if not values:
        return None
    common = majority(v for _, v in values)
    odd = minority_by_value(values, common)
    if not odd:
        return None
    if sum(1 for _, v in values if v == common) * 2 > len(values):
        return tagged(CHECK, Finding.fail(
            f"gpu{gpu} rail", f"rail in another subnet than on the other {profile} nodes",
            observed_sets(odd), common, Action.INVESTIGATE),
            (n for group in odd.values() for n in group))
    split: dict[Any, list[str]] = defaultdict(list)
    for node, value in values:
        split[value].append(node)
    return tagged(CHECK, Finding.warn(
        f"gpu{gpu} rail", f"rail split between subnets on the {profile} nodes, no majority",
        observed_sets(split), "one subnet", Action.INVESTIGATE))


def ib_rails(nodes: Sequence[NodeSummary]) -> list[ClusterFinding]:
    findings: list[ClusterFinding] = []
    compared = 0
    for profile, members in sorted(by_profile(nodes).items()):
        per_gpu: dict[int, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
        # Only the few nodes with a failed ib.rate are looked up below, not every rail.
        rate_failed = {s.node: failed for s in members if s.problems
                       if (failed := {f.component for f in s.problems
                                      if f.check == "ib.rate" and f.status is Status.FAIL})}
        for summary in members:
            for rail in summary.facts.rails:
                per_gpu[int(rail["gpu"])].append((summary.node, rail))
        for gpu, rails in sorted(per_gpu.items()):
            if len(rails) < 2:
                continue
            compared += 1
            # A port the node's own ib.rate already failed is one problem, not two.
            slow = {node for node, rail in rails if node in rate_failed
                    and f"{rail['hca']}/{rail['port']}" in rate_failed[node]}
            for finding in (_subnets(gpu, rails, profile), _slow(gpu, rails, profile, slow)):
                if finding is not None:
                    findings.append(finding)
    if not compared:
        return [tagged(CHECK, Finding.skip(
            "cluster", "fewer than two nodes report InfiniBand rails per GPU"))]
    if not findings:
        findings.append(tagged(CHECK, Finding.passed(
            "cluster", "every GPU's rail in one subnet at one rate", compared)))
    return findings
