"""Which nodes a cluster run gathers: ``--nodes`` as a node set, ``-`` (stdin) or a file of
node sets, else the allocation's (SLURM_JOB_NODELIST)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ClusterShell.NodeSet import NodeSetParseError

from ..base.errors import UsageError
from ..model.nodeset import MAX_NODES, expand, short


def _read_nodes(text: str, where: str) -> list[str]:
    names: set[str] = set()
    for word in text.split() if where != "--nodes" else [text]:
        try:
            names.update(expand(word))
        except NodeSetParseError as exc:
            raise UsageError(f"{where}: bad node set {short(word)!r}: {exc}") from None
        if len(names) > MAX_NODES:
            raise UsageError(f"{where}: more than {MAX_NODES} nodes in all")
    return sorted(names)


def resolve_nodes(arg: str | None) -> list[str] | None:
    """``--nodes``: a node set, ``-`` (stdin) or a file of node sets; without it, the
    allocation's nodes (SLURM_JOB_NODELIST) when run inside one."""
    if arg is None:
        inside = os.environ.get("SLURM_JOB_NODELIST")
        return _read_nodes(inside, "SLURM_JOB_NODELIST") if inside else None
    if arg == "-":
        names = _read_nodes(sys.stdin.read(), "--nodes -")
    elif os.path.isfile(arg):
        try:
            names = _read_nodes(Path(arg).read_text(encoding="utf-8"), f"--nodes {arg}")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--nodes {arg}: cannot read: {exc}") from None
    else:
        names = _read_nodes(arg, "--nodes")
    if not names:
        raise UsageError("--nodes: no nodes given")
    return names
