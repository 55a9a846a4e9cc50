"""The last word of a Slurm entry point whose own start failed: loud, and exit 0.

Slurm drains a node on any non-zero exit of the prolog, epilog or health check. A crash
outside the entry point's own guard (``entry.execute``), or a command line that cannot be
parsed, is our trouble, not the node's (docs/design.md §3). ``fail_closed`` cannot apply here: the
command line or config that would say it is what may have failed. Used by both the click
CLI and the click-free launcher (``agent/launch.py``), so both say it the same way.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from typing import NoReturn


def spare_the_node(program: str, trouble: str) -> NoReturn:
    trouble = " ".join(trouble.split())
    print(f"clusterdiag: {program}: ERROR {trouble}; exiting 0 so Slurm does not drain the "
          "node for it (fail_closed cannot be read here)", file=sys.stderr)
    sys.exit(0)
