"""Whether two names are the same host, as node reports and Slurm spell them.

Slurm names nodes by short name (``gpu001``) while an agent may report its FQDN hostname
(``gpu001.cluster.example``), and a gather may have asked for either: the short names
decide. Kept apart from ``nodeset`` so the prolog can use it without importing
ClusterShell.
"""

from __future__ import annotations


def same_host(a: str, b: str) -> bool:
    return a.split(".", 1)[0] == b.split(".", 1)[0]
