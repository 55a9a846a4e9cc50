"""clusterdiag's node side: sources, collectors, the snapshot, the runner, the CLI.

Importing this package imports nothing else: the Slurm entry points start from here
(agent/launch.py), and ``__version__`` would otherwise load the whole snapshot model.
"""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    if name == "__version__":
        # The launcher imports this package; the snapshot model is off its path.
        from .model.version import VERSION

        return VERSION
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
