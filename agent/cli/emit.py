"""A cluster report written where the report options say: rendered in its format, the bad
nodes to ``--exclude-file``, and the exit code that goes with the verdict."""

from __future__ import annotations

import json
from pathlib import Path

from ...reports.model.cluster import ClusterReport, fold
from ...reports.render.html import render_html
from ...reports.render.line import cluster_line
from ...reports.render.line_limits import NPD_MAX_OUTPUT
from ...reports.render.md import render_md
from ...reports.render.terminal import render_terminal
from ..base.errors import ExitCode
from .output import is_terminal, terminal_width, write


def emit(report: ClusterReport, fmt: str, output: Path | None, exclude_file: Path | None,
         title: str | None = None, max_bytes: int = NPD_MAX_OUTPUT) -> ExitCode:
    """Render, write, and return the exit code (0 ready, 1 not); ``title`` is a first
    line for the terminal table, ``max_bytes`` the budget of ``--format line``."""
    if fmt == "json":
        text = json.dumps(report.to_dict(), indent=1) + "\n"
    elif fmt == "md":
        text = render_md(report)
    elif fmt == "html":
        text = render_html(report)
    elif fmt == "line":
        text = cluster_line(report, max_bytes)
    else:
        tty = is_terminal(output)
        text = (title or "") + render_terminal(report, colour=tty,
                                               width=max(80, terminal_width(output, 160)))
    write(text, output)
    if exclude_file is not None:
        bad = fold(report.bad_nodes)
        write(bad + "\n" if bad else "", exclude_file, "--exclude-file")
    return ExitCode.READY if report.ready else ExitCode.FAIL
