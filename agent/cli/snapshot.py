"""``clusterdiag snapshot``: the raw Snapshot of this node as JSON."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import session
from .options import source_options


@click.command("snapshot")
@source_options
@click.option("--budget", type=float, default=None)
def snapshot(config_path: Path | None, root: Path | None, kernel_log: Path | None,
             simulate: str | None, node: str | None, profile: str | None,
             level: str | None, budget: float | None) -> None:
    """Print the raw Snapshot of this node as JSON."""
    import json
    import time

    from ..collect import SOURCES, collect_snapshot
    from ..runner import collector_params, plan

    config, env = session.setup(config_path, root, kernel_log, simulate, node)
    env.kernel_log_every_line = True  # DESIGN §8: a file's every matching line, no window
    options = session.run_options(config, level, profile, session.budget_flag(budget), None)
    # What every check of the level would ask for (the units systemctl is asked about...),
    # so that `run --from-snapshot` judges the saved snapshot as `run` judges the node.
    env.params = collector_params(config, plan(config, options)[0])
    snap = collect_snapshot(env, SOURCES, time.monotonic() + options.budget_s, options.level)
    sys.stdout.write(json.dumps(snap.to_dict(), indent=2) + "\n")


COMMANDS = (snapshot,)
