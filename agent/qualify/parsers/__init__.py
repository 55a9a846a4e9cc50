"""Which tool printed a text, and its parse. A text no parser recognises is said so, with
the launcher's own complaint when that is what it is (an ``mpirun``/``srun`` failure
prints no tool output at all: that is the launch, not the node). NCCL's own lines
(``NCCL INFO``/``NCCL WARN``) appear in the output of every program that uses NCCL, so they
make a text an NCCL log only where no tool's markers are found."""

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
FALLBACK = "nccl"  # a log of NCCL's lines alone: a training job's, a pasted line
PARSERS[FALLBACK] = (nccl.LIBRARY_MARKERS, nccl.parse)
_LAUNCHER = re.compile(r"There are not enough slots available|mpirun (?:was unable|noticed|"
                       r"detected)|^srun: error:|ORTE was unable|PRTE has lost communication")


def detect(text: str) -> str | None:
    """The tool whose markers appear first in the text, else :data:`FALLBACK` where NCCL's
    own lines do; None if no parser knows it."""
    lines = clean_lines(text)
    for line in lines:
        for tool, (markers, _) in PARSERS.items():
            if tool != FALLBACK and any(m.search(line) for m in markers):
                return tool
    library = PARSERS[FALLBACK][0]
    if any(m.search(line) for line in lines for m in library):
        return FALLBACK
    return None


def launcher_error(text: str) -> str | None:
    for line in clean_lines(text):
        if _LAUNCHER.search(line):
            return line.strip()[:200]
    return None


def parse(tool: str, text: str, run: ToolRun) -> None:
    run.tool = tool
    PARSERS[tool][1](text, run)
