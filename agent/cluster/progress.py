"""A progress bar for gathering: on stderr, only when it is a terminal and the nodes are
enough for one to be read."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.progress import Progress as RichProgress

# Fewer nodes than this finish before a progress bar would be read.
PROGRESS_FROM = 8


class Progress:
    """A rich progress bar on stderr when it is a terminal and there are enough nodes."""

    def __init__(self, total: int, label: str) -> None:
        self.bar: Any = None
        if total >= PROGRESS_FROM and sys.stderr.isatty():
            self.bar = RichProgress(console=Console(stderr=True), transient=True)
            self.task = self.bar.add_task(label, total=total)

    def __enter__(self) -> Callable[[], None] | None:
        if self.bar is None:
            return None
        self.bar.start()
        return lambda: self.bar.advance(self.task)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
