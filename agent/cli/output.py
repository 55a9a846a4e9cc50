"""Writing a report where the report options say: stdout or ``--output``, at the
terminal's width when it is one."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..base.errors import UsageError


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
