"""``clusterdiag topo``: the node's GPU/NIC matrix (not built yet)."""

from __future__ import annotations

import click

from .errors import UsageError


def register(cli: click.Group) -> None:
    @cli.command("topo", context_settings={"ignore_unknown_options": True,
                                           "allow_extra_args": True})
    def topo() -> None:
        """The node's GPU/NIC topology matrix (not built yet)."""
        raise UsageError("topo: not built yet")
