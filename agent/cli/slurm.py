"""Slurm entry points: ``prolog``, ``epilog``, ``healthcheck``.

The work lives in ``agent/slurm/``. Exit codes: 1 only
when the node failed a check; clusterdiag's own trouble exits 0 with a loud stderr line
unless the config sets ``fail_closed: true`` (docs/design.md §3).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..slurm import epilog as epilog_program
from ..slurm import healthcheck as healthcheck_program
from ..slurm import prolog as prolog_program
from ..slurm.entry import Inputs
from .options import source_options


@click.command("prolog")
@source_options
def prolog(config_path: Path | None, root: Path | None, kernel_log: Path | None,
           simulate: str | None, node: str | None, profile: str | None,
           level: str | None) -> None:
    """Slurm Prolog: uses the agent's fresh report, else runs the quick checks; drains
    the node (SLURMD_NODENAME or the host) and exits 1 on a fail."""
    inputs = Inputs(config_path, root, kernel_log, simulate, node, profile, level)
    sys.exit(prolog_program.main(inputs))


@click.command("epilog")
@source_options
def epilog(config_path: Path | None, root: Path | None, kernel_log: Path | None,
           simulate: str | None, node: str | None, profile: str | None,
           level: str | None) -> None:
    """Slurm Epilog: fails and drains on processes left on the job's GPUs after the
    grace period, or on Xids that need action logged during the job."""
    inputs = Inputs(config_path, root, kernel_log, simulate, node, profile, level)
    sys.exit(epilog_program.main(inputs))


@click.command("healthcheck")
@source_options
def healthcheck(config_path: Path | None, root: Path | None, kernel_log: Path | None,
                simulate: str | None, node: str | None, profile: str | None,
                level: str | None) -> None:
    """Slurm HealthCheckProgram: drains a failing node, resumes one it drained once it
    passes again (never one drained for another reason)."""
    inputs = Inputs(config_path, root, kernel_log, simulate, node, profile, level)
    sys.exit(healthcheck_program.main(inputs))


COMMANDS = (prolog, epilog, healthcheck)
