"""Slurm's base blocks (topology/block) as the cluster checks receive them.

In the model because two layers share it: agent/slurm reads the blocks (scontrol, the
topology files) and reports/cluster_checks compares them with the trays' NVLink
partitions; neither may import the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SlurmBlocks:
    """Block name -> its nodes, and where they were read; ``skipped`` says why there are
    none (no Slurm here, a topology that is not block), ``error`` what was wrong with
    what Slurm answered (clusterdiag's trouble, never the trays')."""

    source: str = ""
    blocks: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    skipped: str | None = None
    error: str | None = None
