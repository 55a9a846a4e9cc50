"""nvbandwidth's plain-text matrices (NVIDIA/nvbandwidth), every release since 2022.

A testcase starts at ``Running <name>.``; its description line says what rows and columns
are (``CPU(row) -> GPU(column)``, ``GPU(row) <- GPU(column)``, ``memcpy local GPU``); cells
are GB/s, ``N/A`` (not measured) or, in the oldest release, ``0.00`` on the diagonal. A
matrix whose rows are CPUs (host to device, device to host) or that has no rows of its own
(``memcpy local GPU(column)``) gives one figure per GPU column, the best row; one whose rows
are GPUs too (``GPU(row) -> GPU(column)``, device to device) one per ordered pair. Each
figure carries its testcase's name as its test: which test that is, the declarations say
(checks/qualify/active.py), not the parser.
"""

from __future__ import annotations

import re

from ...model.qualify import Evidence, Figure, ToolRun
from .lines import NUMBER, numbered_lines, pick, reading

_RUNNING = re.compile(r"^Running ([a-z0-9]+(?:_[a-z0-9]+)+)\.\s*$")
_ROW = re.compile(rf"^\s*(\d+)((?:\s+(?:{NUMBER}|N/A))+)\s*$")
_LABELS = re.compile(r"^\s+\d+(?:\s+\d+)*\s*$")
MARKERS = (re.compile(r"^nvbandwidth Version"), _RUNNING)
# What says the tool could not do what it was asked, not that a copy went wrong: a testcase
# this release lacks or bad arguments (nvbandwidth.cpp: "ERROR: Testcase %s not found!",
# "ERROR: Invalid Arguments"), CUDA or NVML failing to start (error_handling.h CU_ASSERT
# prints "[CUDA_ERROR_...] ...", NVML_ASSERT "NVML_ERROR: ...").
_TOOL_ERROR = re.compile(r"^(?:ERROR: |\[CUDA_ERROR_|NVML_ERROR: )")
def matrices(text: str, run: ToolRun, pairs: set[str] | None = None,
             lines: dict[str, dict[tuple[int, int], int]] | None = None
             ) -> dict[str, dict[tuple[int, int], float]]:
    """Each testcase's measured cells, (row, column) -> GB/s; ``pairs`` collects the
    testcases whose rows are GPUs too (their description says ``GPU(row)``), ``lines`` the
    output line of each cell."""
    found: dict[str, dict[tuple[int, int], float]] = {}
    current: str | None = None
    for number_, line in numbered_lines(text):
        running = _RUNNING.match(line)
        if running:
            current = running.group(1)
            found[current] = {}
            continue
        if current is not None and pairs is not None and "GPU(row)" in line:
            pairs.add(current)
            continue
        if _TOOL_ERROR.match(line):
            run.evidence.append(Evidence("error", "node", f"line {number_}: {line.strip()}"))
            continue
        if line.startswith(("Error", "ASSERT")):
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
            value = reading(token)
            if value is not None:
                found[current][(int(row.group(1)), column)] = value
                if lines is not None:
                    lines.setdefault(current, {})[(int(row.group(1)), column)] = number_
    return found


def parse(text: str, run: ToolRun) -> None:
    pairs: set[str] = set()
    lines: dict[str, dict[tuple[int, int], int]] = {}
    found = matrices(text, run, pairs, lines)
    run.complete = bool(found)
    for name, cells in found.items():
        at = lines.get(name, {})
        if name in pairs:  # the oldest release prints 0.00 where it measured nothing
            for (a, b), value in sorted(cells.items()):
                if a != b and value != 0:
                    run.figures.append(Figure(run.node, name, f"gpu{a}-gpu{b}", [value], "GB/s",
                                              "nvbandwidth", name, at.get((a, b))))
            continue
        by_column: dict[int, list[tuple[int, int]]] = {}
        for cell in sorted(cells):
            by_column.setdefault(cell[1], []).append(cell)
        for column, column_cells in sorted(by_column.items()):
            value = pick([cells[c] for c in column_cells])
            where = next(c for c in column_cells if cells[c] is value)
            run.figures.append(Figure(run.node, name, f"gpu{column}", [value], "GB/s",
                                      "nvbandwidth", name, at.get(where)))
    if not found:
        run.notes.append("no nvbandwidth testcase with a matrix")
