"""Writing a report where the report options say: stdout or ``--output``, the bad nodes to
``--exclude-file``, and the exit code that goes with the verdict."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from ...reports.model.cluster import ClusterReport


def is_terminal(output: Path | None) -> bool:
    return output is None and sys.stdout.isatty()


def terminal_width(output: Path | None, piped: int) -> int:
    """The terminal's columns when writing to one, else ``piped``."""
    return os.get_terminal_size().columns if is_terminal(output) else piped


def write(text: str, output: Path | None, what: str = "--output") -> None:
    """``text`` to stdout, or to the file ``output``; a file that cannot be written is a
    usage error naming the flag."""
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{what} {output}: {exc.strerror or exc}") from None


def emit(report: ClusterReport, fmt: str, output: Path | None, exclude_file: Path | None,
         title: str | None = None) -> ExitCode:
    """Render, write, and return the exit code (0 ready, 1 not); ``title`` is a first
    line for the terminal table."""
    import json

    from ...reports.model.cluster import fold

    if fmt == "json":
        text = json.dumps(report.to_dict(), indent=1) + "\n"
    elif fmt == "md":
        from ...reports.render.md import render_md

        text = render_md(report)
    elif fmt == "html":
        from ...reports.render.html import render_html

        text = render_html(report)
    elif fmt == "line":
        from ...reports.render.line import cluster_line

        text = cluster_line(report)
    else:
        from ...reports.render.terminal import render_terminal

        tty = is_terminal(output)
        text = (title or "") + render_terminal(report, colour=tty,
                                               width=max(80, terminal_width(output, 160)))
    write(text, output)
    if exclude_file is not None:
        bad = fold(report.bad_nodes)
        write(bad + "\n" if bad else "", exclude_file, "--exclude-file")
    return ExitCode.READY if report.ready else ExitCode.FAIL
