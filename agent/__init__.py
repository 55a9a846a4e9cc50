"""clusterdiag's node side: sources, collectors, the snapshot, the runner, the CLI."""

from .model.version import VERSION as __version__

__all__ = ["__version__"]
