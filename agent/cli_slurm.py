"""Slurm entry points: ``prolog``, ``epilog``, ``healthcheck`` (not built yet)."""

from __future__ import annotations

import click

from .errors import UsageError


def register(cli: click.Group) -> None:
    for name, summary in (("prolog", "Slurm prolog entry point."),
                          ("epilog", "Slurm epilog entry point."),
                          ("healthcheck", "Slurm HealthCheckProgram entry point.")):
        def command(name: str = name) -> None:
            raise UsageError(f"{name}: not built yet")

        command.__doc__ = f"{summary} (not built yet)"
        cli.command(name, context_settings={"ignore_unknown_options": True,
                                            "allow_extra_args": True})(command)
