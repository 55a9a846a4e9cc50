"""cluster.capacity: how many nodes and GPUs are ready, and with ``--need N`` whether a
job of N nodes can start and on which nodes."""

from __future__ import annotations

from collections.abc import Sequence

from ...checks.core.finding import Action, Finding
from ..model.cluster import ClusterFinding, fold
from ..model.summary import NodeSummary
from .common import tagged

CHECK = "cluster.capacity"


def capacity(nodes: Sequence[NodeSummary], ready: Sequence[str], need: int | None
             ) -> list[ClusterFinding]:
    usable = set(ready)
    gpus = sum(s.gpus for s in nodes if s.node in usable)
    observed = {"nodes_ready": len(usable), "nodes": len(nodes), "gpus_ready": gpus}
    if need is None:
        return [tagged(CHECK, Finding.passed(
            "cluster", "nodes and GPUs ready counted", observed))]
    if len(usable) >= need:
        return [tagged(CHECK, Finding.passed(
            "cluster", f"a job of {need} nodes can start",
            {**observed, "on": fold(sorted(usable))}, need))]
    return [tagged(CHECK, Finding.fail(
        "cluster", f"not enough ready nodes for a job of {need}", observed, need,
        Action.INVESTIGATE))]
