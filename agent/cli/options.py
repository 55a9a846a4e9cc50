"""The option groups several commands share (docs/design.md §3): the source flags, which say where
the node is read from, and the report options, which say how a report is written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ...checks.core.levels import LEVEL_NAMES

FORMATS = ("table", "json", "md", "html", "line")


def _apply(options: list[Callable[[Any], Any]], func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(options):
        func = option(func)
    return func


def source_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--root``, ``--kernel-log``, ``--simulate``, ``--node``, ``--profile``, ``--level``
    and ``--config``: where the node is read from, and how."""
    return _apply([
        click.option("--root", type=click.Path(path_type=Path), default=None,
                     help="Read DIR/sys, DIR/proc, DIR/dev instead of /sys, /proc, /dev."),
        click.option("--kernel-log", type=click.Path(path_type=Path), default=None,
                     help="Read kernel messages from FILE instead of the live kernel log."),
        click.option("--simulate", "simulate", default=None, metavar="SPEC",
                     help="Use the simulator: a profile name (dgx-h100) or a spec file."),
        click.option("--node", default=None, help="With a spec of several nodes, which one."),
        click.option("--profile", default=None, help="Platform profile, or auto (default)."),
        click.option("--level", type=click.Choice(LEVEL_NAMES), default=None,
                     help="quick (default) skips rate and active checks."),
        click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
                     help="Config file (default /etc/clusterdiag/config.yaml when present)."),
    ], func)


def report_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--format``, ``--output``, ``--exclude-file`` and ``--need`` (docs/design.md §3)."""
    return _apply([
        click.option("--format", "fmt", type=click.Choice(FORMATS), default="table",
                     help="table (terminal), json, md (tickets, wikis), html (one file) or "
                          "line (READY, or NOT READY: and the problems, in one line)."),
        click.option("--output", type=click.Path(path_type=Path), default=None,
                     help="Write the report to FILE instead of stdout."),
        click.option("--exclude-file", type=click.Path(path_type=Path), default=None,
                     help="Write the bad nodes alone, as one folded node set, to FILE."),
        click.option("--need", type=click.IntRange(min=1), default=None, metavar="N",
                     help="Ready means: a job of N nodes can start on the ready nodes."),
    ], func)
