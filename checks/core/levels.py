"""When a check runs: the level of a run and the mode it runs in.

The level says how deep a run goes (``quick``: one sample; ``full``: two samples for the
rate checks, and the active tests); the mode says who runs it (``run`` on the command line,
the ``agent`` daemon, a Slurm entry point), which some checks judge by (checks/nccl/,
gpu.processes) and some do not apply in (``skip_in``). Both are string enums, so a value
compares, hashes, prints and serialises as its name does: reports and config files keep
the plain words.

Imported by the prolog's plan (checks/core/index.py): nothing but ``enum``, through finding.py.
"""

from __future__ import annotations

from .finding import StrEnum


class Level(StrEnum):
    QUICK = "quick"
    FULL = "full"


class Mode(StrEnum):
    RUN = "run"  # clusterdiag run (and a saved snapshot judged offline)
    AGENT = "agent"  # the node daemon: never loads the GPUs
    PROLOG = "prolog"
    EPILOG = "epilog"
    HEALTHCHECK = "healthcheck"


LEVELS = tuple(Level)
LEVEL_NAMES = tuple(level.value for level in Level)  # what --level and the config accept
# The levels a rate or active check runs at: it needs two samples, or loads the GPUs.
FULL_ONLY = (Level.FULL,)


def levels_of(rate: bool, active: bool) -> tuple[Level, ...]:
    """The levels a check runs at, from what it declares."""
    return FULL_ONLY if (rate or active) else LEVELS
