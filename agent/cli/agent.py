"""``clusterdiag agent``: the node daemon (agent/daemon/)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..daemon import main
from .options import source_options


@click.command("agent")
@source_options
@click.option("--listen", default=None, metavar="ADDR:PORT",
              help="Where to serve the API (default agent.listen, 127.0.0.1:9464).")
@click.option("--interval", type=float, default=None, metavar="S",
              help="Seconds between collections (default agent.interval_s, 30).")
@click.option("--state-dir", "state_path", type=click.Path(path_type=Path), default=None,
              help="Where state survives restarts (default /var/lib/clusterdiag).")
@click.option("--clear", "clear_id", default=None, metavar="ID",
              help="Clear a sticky XID finding by its event id (or 'all'), then exit.")
def agent(config_path: Path | None, root: Path | None, kernel_log: Path | None,
          simulate: str | None, node: str | None, profile: str | None, level: str | None,
          listen: str | None, interval: float | None, state_path: Path | None,
          clear_id: str | None) -> None:
    """The node daemon: collects every interval, listens for XID events, keeps history,
    serves /healthz, /v1/report, /v1/snapshot and /metrics; SIGHUP reloads the config."""
    if clear_id is not None:
        click.echo(main.clear(config_path, state_path, clear_id))
        return
    sys.exit(main.start(config_path, root, kernel_log, simulate, node, profile, level,
                        listen, interval, state_path))


COMMANDS = (agent,)
