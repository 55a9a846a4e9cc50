"""Node sets in Slurm/ClusterShell syntax (``gpu[001-128,130]``), expanded with a bound.

In the model because every layer names nodes this way: simulator specs, the cluster
checks' settings and ``--nodes`` (the simulator may not import reports/).

ClusterShell expands a range into a set of every index before anything can look at its
size, so a typo such as ``n[1-99999999]`` costs minutes. No cluster has more than
MAX_NODES nodes: a range wider than that is refused before ClusterShell sees it.
"""

from __future__ import annotations

import re

from ClusterShell.NodeSet import NodeSet, NodeSetParseError

MAX_NODES = 100_000
_RANGE = re.compile(r"(\d+)-(\d+)")


def expand(text: str) -> list[str]:
    """The node names of ``text``; NodeSetParseError for bad syntax or an absurd size."""
    for low, high in _RANGE.findall(text):
        if int(high) - int(low) >= MAX_NODES:
            raise NodeSetParseError(text, f"range {low}-{high} is more than {MAX_NODES} nodes")
    return list(NodeSet(text))
