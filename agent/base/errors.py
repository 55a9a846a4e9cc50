"""clusterdiag's exit codes (docs/design.md §3) and its own error kinds, each mapped to one.

The one place an exit status is spelled: every command, the daemon and the Slurm entry
points exit with an ExitCode. Beside docs/design.md §3's four verdicts it names the two statuses
of a run a signal stopped (130, 143), which §3 leaves to the shell's convention.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What every command's exit status means, everywhere (docs/design.md §3)."""

    READY = 0  # pass, or warnings only
    FAIL = 1  # at least one fail: the node or cluster is not ready
    USAGE = 2  # a usage or configuration error
    COLLECT = 3  # clusterdiag could not collect at all
    # Stopped by a signal: 128 + its number, the shell's convention (no verdict was given).
    INTERRUPTED = 130  # SIGINT, Ctrl-C
    TERMINATED = 143  # SIGTERM


class ClusterdiagError(Exception):
    """A problem a user can fix; printed as one line, never as a traceback."""

    exit_code = ExitCode.USAGE


class UsageError(ClusterdiagError):
    exit_code = ExitCode.USAGE


class ConfigError(ClusterdiagError):
    exit_code = ExitCode.USAGE


class CollectError(ClusterdiagError):
    """clusterdiag could not collect at all (e.g. its state directory is unwritable)."""

    exit_code = ExitCode.COLLECT
