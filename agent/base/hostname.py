"""Whether two names are the same host, as node reports and Slurm spell them.

Slurm names nodes by short name (``gpu001``) while an agent may report its FQDN hostname
(``gpu001.cluster.example``), and a gather may have asked for either: the short names
decide. Kept apart from ``agent/model/nodeset.py`` so the prolog can use it without importing
ClusterShell.

A name another node sends is checked before anything folds it into a node set or writes
it after ``sbatch --exclude=``: host-name characters only (letters, digits, ``-``, ``_``,
``.``; not starting with ``-`` or ``.``), at most 253 of them. Anything else (``[``, ``,``,
``/`` that Slurm reads as a file name, spaces, control characters) cannot be a node.
"""

from __future__ import annotations

import re

_NODE_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}"  # compiled on first use (re caches it)


def is_node_name(name: object) -> bool:
    return isinstance(name, str) and re.fullmatch(_NODE_NAME, name) is not None


def same_host(a: str, b: str) -> bool:
    return a.split(".", 1)[0] == b.split(".", 1)[0]
