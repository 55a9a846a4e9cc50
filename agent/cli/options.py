"""The option groups several commands share (docs/design.md §3): the source flags, which say where
the node is read from, and the report options, which say how a report is written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ...checks.core.levels import LEVEL_NAMES
from ...reports.render.line_limits import MIN_BYTES, NPD_MAX_OUTPUT
from ..base.errors import UsageError

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
    """``--format``, ``--output``, ``--exclude-file``, ``--need`` and ``--max-bytes``
    (docs/design.md §3)."""
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
        click.option("--max-bytes", type=click.IntRange(min=MIN_BYTES), default=None,
                     metavar="N",
                     help=f"With --format line: at most N bytes (default {NPD_MAX_OUTPUT}, "
                          "node-problem-detector's max_output_length); the problems that "
                          "do not fit are counted, +K more."),
    ], func)


def line_bytes(fmt: str, max_bytes: int | None) -> int:
    """The byte budget of ``--format line``; ``--max-bytes`` with another format would
    change nothing, so it is a usage error rather than silently ignored."""
    if max_bytes is not None and fmt != "line":
        raise UsageError(f"--max-bytes applies to --format line, not --format {fmt}")
    return NPD_MAX_OUTPUT if max_bytes is None else max_bytes
