"""``clusterdiag agent``: the node daemon (not built yet)."""

from __future__ import annotations

import click

from .errors import UsageError


def register(cli: click.Group) -> None:
    @cli.command("agent", context_settings={"ignore_unknown_options": True,
                                            "allow_extra_args": True})
    def agent() -> None:
        """The node daemon: HTTP API, metrics, history, XID listener (not built yet)."""
        raise UsageError("agent: not built yet")
