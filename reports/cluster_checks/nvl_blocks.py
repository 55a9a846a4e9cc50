"""cluster.nvl_blocks: Slurm's blocks and the trays' NVLink partitions agree.

Sites keep a multi-node-NVLink job inside one NVLink partition with Slurm's block
topology (topology/block): a job is placed within a block. A block holding trays of two
partitions (cluster UUID and clique id, from each tray's GPU fabric info) sends such a
job across a partition boundary, where NCCL leaves NVLink for the network and IMEX
memory sharing fails. Each block's trays are compared: the partition most of them are
in is the block's, and the trays in another are named for ``--exclude`` until the
topology or the partition is fixed. Several blocks inside one partition is the usual
healthy layout (a rack cut into blocks of BlockSizes), so only a block's own trays are
compared. A tray ``cluster.nvl_domain`` already names (no partition, or another than
its rack's) is its to name, so one fault is one finding: the blocks are compared on the
trays the racks agree on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ...agent.model.slurm_blocks import SlurmBlocks
from ...checks.core.finding import Action, Finding
from ..model.cluster import ClusterFinding
from ..model.summary import NodeSummary
from .common import majority, minority_by_value, observed_sets, tagged
from .nvl_domain import ZERO_UUID, domain, is_tray

CHECK = "cluster.nvl_blocks"


def _show(pair: tuple[str, int]) -> str:
    return f"{pair[0]}/{pair[1]}"


def _check_block(name: str, trays: list[tuple[str, tuple[str, int]]]) -> ClusterFinding:
    component = f"block {name}"
    common = majority(pair for _, pair in trays)
    odd = minority_by_value(trays, common)
    if not odd:
        return tagged(CHECK, Finding.passed(
            component, "block's trays in one NVLink partition", len(trays), _show(common)))
    return tagged(CHECK, Finding.fail(
        component, "block holds trays of another NVLink partition than its own",
        observed_sets(odd, _show), _show(common), Action.FIX_CONFIG),
        (node for group in odd.values() for node in group))


def nvl_blocks(nodes: Sequence[NodeSummary], blocks: SlurmBlocks | None,
               named: Iterable[str] = ()) -> list[ClusterFinding]:
    """``named``: the trays cluster.nvl_domain found wanting, left to its findings."""
    left = set(named)
    trays = {s.node: pair for s in nodes if s.answered and is_tray(s.profile)
             and s.node not in left and (pair := domain(s)) is not None
             and pair[0] != ZERO_UUID and pair[1]}
    if not trays:
        return [tagged(CHECK, Finding.skip("cluster", "no NVL72 trays in an NVLink partition"))]
    if blocks is None:
        return [tagged(CHECK, Finding.skip(
            "cluster", "Slurm's blocks not read (clusterdiag run --nodes reads them)"))]
    if blocks.error is not None:
        return [tagged(CHECK, Finding.error("cluster", "Slurm's block topology unreadable",
                                            blocks.error))]
    if blocks.skipped is not None:
        return [tagged(CHECK, Finding.skip("cluster", "no Slurm block topology",
                                           blocks.skipped))]
    found = [_check_block(name, members) for name, nodes_of in sorted(blocks.blocks.items())
             if (members := [(n, trays[n]) for n in nodes_of if n in trays])]
    if not found:
        return [tagged(CHECK, Finding.skip(
            "cluster", "no tray of this run is in a Slurm block", blocks.source))]
    return found
