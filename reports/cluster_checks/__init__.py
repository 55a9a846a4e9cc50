"""The cross-node checks (``cluster.*`` in docs/design.md §5): plain functions over node summaries.

``judge`` runs them all and builds the ClusterReport. Capacity runs last, because what is
ready depends on what the other checks found.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...agent.model.slurm_blocks import SlurmBlocks
from ...agent.model.version import VERSION
from ..model.cluster import ClusterFinding, ClusterReport
from ..model.summary import NodeSummary, unanswered
from .capacity import capacity
from .ib_rails import ib_rails
from .imex_domain import imex_domain
from .nvl_blocks import nvl_blocks
from .nvl_domain import nvl_domain
from .outliers import outliers
from .profiles import profiles
from .reachability import Unreachable, reachability
from .settings import ClusterSettings, settings_from
from .versions import versions

# id -> one line: what `checks list` and the fault table's consistency test read.
CATALOG = {
    "cluster.versions": "driver, CUDA, NCCL, VBIOS, HCA firmware, kernel, clusterdiag agree "
                        "within each profile",
    "cluster.profiles": "the nodes of one node set run one platform profile",
    "cluster.nvl_domain": "each NVL72 rack: trays present, fabric registered, one partition",
    "cluster.nvl_blocks": "each Slurm block's NVL72 trays are in one NVLink partition",
    "cluster.imex_domain": "the tray its IMEX domain's other trays agree is not READY "
                           "fails alone, never those trays",
    "cluster.ib_rails": "the port serving GPU i is in one subnet at one rate on every node",
    "cluster.outliers": "no node far above its peers' median temperature or error counts",
    "cluster.reachability": "every node answered with a node report we read",
    "cluster.capacity": "nodes and GPUs ready; with --need N, whether the job can start",
}


def judge(summaries: Sequence[NodeSummary], failures: Sequence[Unreachable],
          settings: ClusterSettings, *, via: str, need: int | None = None,
          version: str = VERSION, blocks: SlurmBlocks | None = None) -> ClusterReport:
    """One cluster report from the nodes that answered and the reasons the others did not;
    ``blocks`` are Slurm's, where the caller read them (``run --nodes``)."""
    nodes = {s.node: s for s in summaries}
    for failure in failures:
        if failure.node is not None and failure.node not in nodes:
            nodes[failure.node] = unanswered(failure.node)
    everyone = list(nodes.values())
    domains = nvl_domain(everyone, settings)
    findings: list[ClusterFinding] = [
        *reachability(failures, len(everyone)),
        *versions(everyone, settings),
        *profiles(everyone),
        *domains,
        *nvl_blocks(everyone, blocks, (n for c in domains for n in c.nodes)),
        *imex_domain(everyone),
        *ib_rails(everyone),
        *outliers(everyone, settings),
    ]
    report = ClusterReport(everyone, findings, version=version, via=via, need=need)
    report.findings.extend(capacity(everyone, report.ready_nodes, need))
    return report


__all__ = ["CATALOG", "ClusterSettings", "Unreachable", "judge", "settings_from"]
