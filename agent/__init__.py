"""clusterdiag's node side: sources, collectors, the snapshot, the runner, the CLI."""

__version__ = "0.1.0"
