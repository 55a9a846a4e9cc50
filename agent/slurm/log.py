"""One stderr line per event, ``key=value``: what journald and slurmd's log keep.

Slurm does not keep a prolog's stdout, and its stderr only reaches slurmd's log, so every
line must stand alone and name the program, the job and the user.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def _value(value: Any) -> str:
    text = str(value).replace("\n", " ")
    if not text or any(c in text for c in ' "='):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def format_line(program: str, event: str, fields: Mapping[str, Any]) -> str:
    pairs = " ".join(f"{k}={_value(v)}" for k, v in fields.items() if v is not None)
    return f"clusterdiag {program}: {event}" + (f" {pairs}" if pairs else "")


class Log:
    """Writes to stderr with the job's fields on every line; never raises (a closed
    stderr must not turn a passing prolog into a failing one)."""

    def __init__(self, program: str, **fields: Any) -> None:
        self.program = program
        self.fields: dict[str, Any] = dict(fields)

    def __call__(self, event: str, **fields: Any) -> None:
        line = format_line(self.program, event, {**self.fields, **fields})
        try:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
