"""nvbandwidth's plain-text matrices (NVIDIA/nvbandwidth), every release since 2022.

A testcase starts at ``Running <name>.``; its description line says what rows and columns
are (``CPU(row) -> GPU(column)``, ``GPU(row) <- GPU(column)``, ``memcpy local GPU``); cells
are GB/s, ``N/A`` (not measured) or, in the oldest release, ``0.00`` on the diagonal.
Host↔device testcases give one figure per GPU column (the best CPU row), device↔device
ones one per ordered pair, ``device_local_copy`` the GPU's own memory bandwidth.
"""

from __future__ import annotations

import re

from ...model.qualify import Evidence, Figure, ToolRun
from .lines import clean_lines, number

_RUNNING = re.compile(r"^Running ([a-z0-9]+(?:_[a-z0-9]+)+)\.\s*$")
_ROW = re.compile(r"^\s*(\d+)((?:\s+(?:[0-9.]+|N/A))+)\s*$")
_LABELS = re.compile(r"^\s+\d+(?:\s+\d+)*\s*$")
MARKERS = (re.compile(r"^nvbandwidth Version"), _RUNNING)
# testcase -> the test its figures are judged in (CE copies: what peers threshold on).
TESTCASES = {
    "host_to_device_memcpy_ce": "h2d",
    "device_to_host_memcpy_ce": "d2h",
    "device_to_device_memcpy_read_ce": "d2d",
    "device_local_copy": "hbm",
}
# Used only when the preferred testcase is not in the output.
FALLBACKS = {
    "host_to_device_memcpy_sm": "h2d",
    "device_to_host_memcpy_sm": "d2h",
    "device_to_device_memcpy_write_ce": "d2d",
}


def matrices(text: str, run: ToolRun) -> dict[str, dict[tuple[int, int], float]]:
    """Each testcase's measured cells, (row, column) -> GB/s."""
    found: dict[str, dict[tuple[int, int], float]] = {}
    current: str | None = None
    for number_, line in enumerate(clean_lines(text), 1):
        running = _RUNNING.match(line)
        if running:
            current = running.group(1)
            found[current] = {}
            continue
        if line.startswith("Error"):
            run.evidence.append(Evidence("fail", "node", f"line {number_}: {line.strip()}"))
            continue
        if current is None or _LABELS.match(line):
            continue
        row = _ROW.match(line)
        if row is None:
            if line.startswith(("SUM ", "Waived")) or not line.strip():
                current = None if line.startswith("Waived") else current
            continue
        for column, token in enumerate(row.group(2).split()):
            value = number(token)
            if value is not None:
                found[current][(int(row.group(1)), column)] = value
    return found


def parse(text: str, run: ToolRun) -> None:
    found = matrices(text, run)
    run.complete = bool(found)
    chosen: dict[str, str] = {}
    for name, test in (*TESTCASES.items(), *FALLBACKS.items()):
        if found.get(name) and test not in chosen:
            chosen[test] = name
    for test, name in chosen.items():
        cells = found[name]
        if test == "d2d":
            for (a, b), value in sorted(cells.items()):
                if a != b and value > 0:
                    run.figures.append(Figure(run.node, test, f"gpu{a}-gpu{b}", [value], "GB/s",
                                              "nvbandwidth", name))
            continue
        best: dict[int, float] = {}
        for (_, column), value in cells.items():
            best[column] = max(value, best.get(column, 0.0))
        for column, value in sorted(best.items()):
            run.figures.append(Figure(run.node, test, f"gpu{column}", [value], "GB/s",
                                      "nvbandwidth", name))
    unused = sorted(set(found) - set(chosen.values()))
    if unused:
        run.notes.append(f"testcases read but not judged: {', '.join(unused)}")
    if not found:
        run.notes.append("no nvbandwidth testcase with a matrix")
