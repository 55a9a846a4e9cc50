"""Node sets in Slurm/ClusterShell syntax (``gpu[001-128,130]``), expanded with a bound.

In the model because every layer names nodes this way: simulator specs, the cluster
checks' settings and ``--nodes`` (the simulator may not import reports/).

ClusterShell expands a range into a set of every index before anything can look at its
size, so a typo such as ``n[1-99999999]`` costs minutes. No cluster has more than
MAX_NODES nodes, and the cap is on the total: the ranges' widths added up are refused
past it before ClusterShell sees them (twenty ranges of 99,999 are two million indices),
and the set's size after it (``a[1-99999]b[1-99999]`` is ten billion names from two
small ranges, which ClusterShell holds as a product until it is listed).
"""

from __future__ import annotations

import re

from ClusterShell.NodeSet import NodeSet, NodeSetParseError

MAX_NODES = 100_000
_RANGE = re.compile(r"(\d+)-(\d+)")
# A node name goes into argv (ssh's destination, srun's --nodelist, mpirun's --host) and
# into reports: a host name (RFC 1123 letters, digits, '-' and '.', and the '_' some sites
# use), never one that starts with '-' (ssh would read "-oProxyCommand=..." as an
# option) or holds a space, a quote or a shell character. ClusterShell keeps any text.
_NODE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,252}\Z")


def expand(text: str) -> list[str]:
    """The node names of ``text``; NodeSetParseError for bad syntax or an absurd size."""
    width = sum(int(high) - int(low) + 1 for low, high in _RANGE.findall(text))
    if width > MAX_NODES:
        raise NodeSetParseError(short(text), f"its ranges hold more than {MAX_NODES} nodes")
    try:
        nodes = NodeSet(text)
    except NodeSetParseError as exc:  # its text quotes the part, which may be huge
        reason, quoted = str(exc), f': "{exc.part}"'
        reason = reason[:-len(quoted)] if reason.endswith(quoted) else "bad syntax"
        raise NodeSetParseError(short(str(exc.part)), reason) from None
    if len(nodes) > MAX_NODES:
        raise NodeSetParseError(short(text), f"more than {MAX_NODES} nodes")
    names = list(nodes)
    for name in names:
        if not _NODE_NAME.match(name):
            raise NodeSetParseError(short(repr(name)), "not a host name (letters, digits, "
                                    "'.', '-', '_'; no leading '-')")
    return names


def short(text: str, limit: int = 60) -> str:
    """A node set as an error message may quote it: a long one cut, with its length."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"
