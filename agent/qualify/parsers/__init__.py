"""Which tool printed a text, and its parse. A text no parser recognises is said so, with
the launcher's own complaint when that is what it is (an ``mpirun``/``srun`` failure
prints no tool output at all: that is the launch, not the node)."""

from __future__ import annotations

import re
from collections.abc import Callable
from re import Pattern

from ...model.qualify import ToolRun
from . import dcgm, gpuburn, nccl, nvbandwidth, perftest
from .lines import clean_lines

PARSERS: dict[str, tuple[tuple[Pattern[str], ...], Callable[[str, ToolRun], None]]] = {
    "nccl-tests": (nccl.MARKERS, nccl.parse),
    "perftest": (perftest.MARKERS, perftest.parse),
    "nvbandwidth": (nvbandwidth.MARKERS, nvbandwidth.parse),
    "dcgmi": (dcgm.MARKERS, dcgm.parse),
    "gpu_burn": (gpuburn.MARKERS, gpuburn.parse),
}
_LAUNCHER = re.compile(r"There are not enough slots available|mpirun (?:was unable|noticed|"
                       r"detected)|^srun: error:|ORTE was unable|PRTE has lost communication")


def detect(text: str) -> str | None:
    """The tool whose markers appear first in the text; None if no parser knows it."""
    first: tuple[int, str] | None = None
    for index, line in enumerate(clean_lines(text)):
        for tool, (markers, _) in PARSERS.items():
            if any(m.search(line) for m in markers):
                if first is None or index < first[0]:
                    first = (index, tool)
                break
        if first is not None:
            return first[1]
    return None


def launcher_error(text: str) -> str | None:
    for line in clean_lines(text):
        if _LAUNCHER.search(line):
            return line.strip()[:200]
    return None


def parse(tool: str, text: str, run: ToolRun) -> None:
    run.tool = tool
    PARSERS[tool][1](text, run)
