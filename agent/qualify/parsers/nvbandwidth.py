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


# A multinode build (cmake -DMULTINODE=1) lists every MPI process instead of the local
# devices: ``Process <rank> (<host>): device <ordinal>: <name> (<pci>)`` (output.cpp:151-155,
# NVIDIA/nvbandwidth @ 66746a3bef61), the rank right-aligned to the width of the largest
# (common.h:210-216 getPaddedProcessId); the host is gethostname()'s (nvbandwidth.cpp:193)
# and the ordinal each rank chose, its count of lower ranks on the same host modulo the
# host's GPUs (output.cpp:113-123). Its matrices then have one row and one column per rank
# (multinode_testcases.cpp:29-46: ``PeerValueMatrix(worldSize, worldSize)``).
_PROCESS = re.compile(r"^Process\s+(\d{1,6}) \(([A-Za-z0-9][A-Za-z0-9._-]{0,252})\): "
                      r"device (\d{1,3}): ")
MAX_RANKS = 1152  # what is read: sixteen NVL72 racks of 72 GPUs, far beyond one rack


def processes(text: str, run: ToolRun) -> dict[int, tuple[str, int]]:
    """Each rank's (host, CUDA ordinal), from the multinode build's process lines; a line
    that names no valid host, repeats a rank or goes beyond ``MAX_RANKS`` is noted, not
    read."""
    found: dict[int, tuple[str, int]] = {}
    for number_, line in numbered_lines(text):
        if not line.startswith("Process "):
            continue
        match = _PROCESS.match(line)
        rank = int(match.group(1)) if match else -1
        if match is None or rank >= MAX_RANKS or rank in found:
            run.notes.append(f"line {number_}: process line not read: {line[:120].strip()}")
            continue
        found[rank] = (match.group(2), int(match.group(3)))
    return found


def multinode_matrix(text: str, testcase: str, run: ToolRun
                     ) -> tuple[dict[int, tuple[str, int]], dict[tuple[int, int], float]]:
    """The ranks and ``testcase``'s cells, (row rank, column rank) -> GB/s, of a multinode
    run; a cell whose row or column is no listed rank is dropped."""
    ranks = processes(text, run)
    cells = matrices(text, run).get(testcase, {})
    kept = {(a, b): v for (a, b), v in cells.items() if a in ranks and b in ranks and a != b}
    if len(kept) < len(cells):
        run.notes.append(f"{len(cells) - len(kept)} cell(s) of {testcase} name no listed "
                         "process")
    run.complete = bool(kept)
    return ranks, kept
