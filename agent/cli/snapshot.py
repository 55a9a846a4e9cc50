"""``clusterdiag snapshot``: the raw Snapshot of this node as JSON."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from ..run import session
from ..run.collect import SOURCES, collect_snapshot
from ..run.runner import collector_params, plan
from .options import source_options
from .run import exit_if_nothing_read


@click.command("snapshot")
@source_options
@click.option("--budget", type=float, default=None)
def snapshot(config_path: Path | None, root: Path | None, kernel_log: Path | None,
             simulate: str | None, node: str | None, profile: str | None,
             level: str | None, budget: float | None) -> None:
    """Print the raw Snapshot of this node as JSON (exit 3 when no source could be read)."""
    config, env = session.setup(config_path, root, kernel_log, simulate, node)
    env.kernel_log_every_line = True  # docs/design.md §8: a file's every matching line, no window
    options = session.run_options(config, level, profile, session.budget_flag(budget), None)
    # What every check of the level would ask for (the units systemctl is asked about...),
    # so that `run --from-snapshot` judges the saved snapshot as `run` judges the node.
    env.params = collector_params(config, plan(config, options)[0])
    snap = collect_snapshot(env, SOURCES, time.monotonic() + options.budget_s, options.level)
    data = snap.to_dict()
    sys.stdout.write(json.dumps(data, indent=2) + "\n")
    exit_if_nothing_read(data["sources"])  # docs/design.md §3: could not collect is exit 3


COMMANDS = (snapshot,)
