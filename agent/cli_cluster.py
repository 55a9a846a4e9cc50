"""Cluster commands: ``report merge`` and ``demo`` (not built yet)."""

from __future__ import annotations

import click

from .errors import UsageError


def register(cli: click.Group) -> None:
    for name, summary in (("report", "Merge saved node reports into a cluster report."),
                          ("demo", "A simulated cluster end to end.")):
        def command(name: str = name) -> None:
            raise UsageError(f"{name}: not built yet")

        command.__doc__ = f"{summary} (not built yet)"
        cli.command(name, context_settings={"ignore_unknown_options": True,
                                            "allow_extra_args": True})(command)
