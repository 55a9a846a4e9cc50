"""Slurm entry points: ``prolog``, ``epilog``, ``healthcheck``.

The work lives in ``agent/slurm/`` and is imported when a command runs. Exit codes: 1 only
when the node failed a check; clusterdiag's own trouble exits 0 with a loud stderr line
unless the config sets ``fail_closed: true`` (DESIGN §3).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .options import source_options


@click.command("prolog")
@source_options
def prolog(config_path: Path | None, root: Path | None, kernel_log: Path | None,
           simulate: str | None, node: str | None, profile: str | None,
           level: str | None) -> None:
    """Slurm Prolog: uses the agent's fresh report, else runs the quick checks; drains
    the node (SLURMD_NODENAME or the host) and exits 1 on a fail."""
    from ..slurm.entry import Inputs
    from ..slurm.prolog import main

    sys.exit(main(Inputs(config_path, root, kernel_log, simulate, node, profile, level)))


@click.command("epilog")
@source_options
def epilog(config_path: Path | None, root: Path | None, kernel_log: Path | None,
           simulate: str | None, node: str | None, profile: str | None,
           level: str | None) -> None:
    """Slurm Epilog: fails and drains on processes left on the job's GPUs after the
    grace period, or on Xids that need action logged during the job."""
    from ..slurm.entry import Inputs
    from ..slurm.epilog import main

    sys.exit(main(Inputs(config_path, root, kernel_log, simulate, node, profile, level)))


@click.command("healthcheck")
@source_options
def healthcheck(config_path: Path | None, root: Path | None, kernel_log: Path | None,
                simulate: str | None, node: str | None, profile: str | None,
                level: str | None) -> None:
    """Slurm HealthCheckProgram: drains a failing node, resumes one it drained once it
    passes again (never one drained for another reason)."""
    from ..slurm.entry import Inputs
    from ..slurm.healthcheck import main

    sys.exit(main(Inputs(config_path, root, kernel_log, simulate, node, profile, level)))


COMMANDS = (prolog, epilog, healthcheck)
# Slurm drains a node on any non-zero exit of these, so main() spares the node on our own
# trouble (agent/cli/__init__.py).
ENTRY_POINTS = frozenset(command.name for command in COMMANDS if command.name)
