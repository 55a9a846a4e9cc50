"""A regular expression compiled when first used, not when its module is imported.

The prolog imports every collector on every node for every job, and most of their patterns
(the kernel log's two dozen, the Slurm and RoCE tools' parsers) match only what a healthy
node never prints: compiling them all at import cost the no-report prolog ~10 % of its run.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any


class LazyPattern:
    """``re.compile(source, flags)`` on first use; the methods the parsers call, the same."""

    __slots__ = ("_compiled", "_flags", "_source")

    def __init__(self, source: str, flags: int = 0) -> None:
        self._source = source
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self._source, self._flags)
        return self._compiled

    @property
    def pattern(self) -> str:
        return self._source

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled.match(string, pos, endpos)

    def fullmatch(self, string: str, pos: int = 0, endpos: int = sys.maxsize
                  ) -> re.Match[str] | None:
        return self.compiled.fullmatch(string, pos, endpos)

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize
               ) -> re.Match[str] | None:
        return self.compiled.search(string, pos, endpos)

    def findall(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> list[Any]:
        # list[Any] as typeshed says: strings, or tuples of the groups when there are some
        return self.compiled.findall(string, pos, endpos)

    def sub(self, repl: str, string: str, count: int = 0) -> str:
        return self.compiled.sub(repl, string, count)
