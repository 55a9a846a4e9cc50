"""A simulated cluster as a whole: which nodes exist, and the racks its spec declares."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from ClusterShell.NodeSet import NodeSet

from ..model.slurm_blocks import SlurmBlocks
from .faults.catalog import FAULTS
from .spec import ClusterSpec


def present(spec: ClusterSpec) -> ClusterSpec:
    """The spec without the nodes a fault takes out of the cluster (``tray_missing``)."""
    nodes = {name: node for name, node in spec.nodes.items()
             if not any(FAULTS[f["kind"]].absent for f in node.faults)}
    return replace(spec, nodes=nodes)


def racks(spec: ClusterSpec) -> dict[str, str]:
    """Rack name -> folded node set of its trays, absent ones included: the layout an
    operator would write under ``cluster.racks``."""
    members: dict[str, list[str]] = defaultdict(list)
    for name, node in spec.nodes.items():
        if node.rack:
            members[node.rack].append(name)
    return {rack: str(NodeSet.fromlist(names)) for rack, names in sorted(members.items())}


def blocks(spec: ClusterSpec) -> SlurmBlocks:
    """Slurm's block topology as an operator would write it for the spec: one block per
    rack, named after it, holding its trays (absent ones included); a tray with a
    ``tray_outside_block`` fault is listed in the block the fault names instead."""
    members: dict[str, list[str]] = defaultdict(list)
    for name, node in spec.nodes.items():
        moved = [f["block"] for f in node.faults if "block" in f]
        if moved or node.rack:
            members[str(moved[0]) if moved else str(node.rack)].append(name)
    return SlurmBlocks("simulated", {block: tuple(names)
                                     for block, names in sorted(members.items())})
