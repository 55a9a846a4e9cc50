"""clusterdiag's own error kinds, each mapped to one exit code by the CLI."""

from __future__ import annotations


class ClusterdiagError(Exception):
    """A problem a user can fix; printed as one line, never as a traceback."""

    exit_code = 2


class UsageError(ClusterdiagError):
    exit_code = 2


class ConfigError(ClusterdiagError):
    exit_code = 2


class CollectError(ClusterdiagError):
    """clusterdiag could not collect at all (e.g. its state directory is unwritable)."""

    exit_code = 3
