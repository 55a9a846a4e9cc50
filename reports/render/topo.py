"""The node's GPU/NIC matrix, laid out as ``nvidia-smi topo -m`` prints it.

Scripts written against nvidia-smi's output read this one unchanged: rows ``GPU0``...
then ``NIC0``..., tab-separated cells, self as `` X ``, CPU/NUMA affinity columns after
the GPU cells, then the legend and the NIC legend (layout of the real captures in
tests/fixtures/topo, driver 590).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any

from ...agent.model import Snapshot
from ...checks.core.topology import LEGEND, Endpoint, gpu_pair, gpus, nics, pair


@dataclass
class TopoMatrix:
    gpus: list[Endpoint]
    nics: list[Endpoint]
    cells: dict[str, dict[str, str]] = field(default_factory=dict)  # row label -> col -> class
    cpu_affinity: dict[str, str] = field(default_factory=dict)  # GPU label -> cpulist
    numa_affinity: dict[str, str] = field(default_factory=dict)

    @property
    def labels(self) -> list[str]:
        return [e.label for e in [*self.gpus, *self.nics]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpus": [{"label": g.label, "bus_id": g.bdf,
                      "cpu_affinity": self.cpu_affinity[g.label],
                      "numa_affinity": self.numa_affinity[g.label]} for g in self.gpus],
            "nics": [{"label": n.label, "name": n.name, "bus_id": n.bdf, "role": n.role,
                      "role_reason": n.role_reason}
                     for n in self.nics],
            "matrix": self.cells,
        }


def build(snap: Snapshot) -> TopoMatrix:
    matrix = TopoMatrix(gpus(snap), nics(snap))
    every = [*matrix.gpus, *matrix.nics]
    for row in every:
        matrix.cells[row.label] = {
            col.label: ("X" if row is col else
                        gpu_pair(snap, row, col) if row.role == col.role == "gpu" else
                        pair(row, col))
            for col in every}
    for gpu in matrix.gpus:
        dev = gpu.pci
        matrix.cpu_affinity[gpu.label] = (dev.local_cpulist if dev and dev.local_cpulist
                                          else "N/A")
        numa = dev.numa_node if dev else None
        matrix.numa_affinity[gpu.label] = str(numa) if numa is not None and numa >= 0 else "N/A"
    return matrix


def _cell(value: str) -> str:
    return " X " if value == "X" else value


def render_text(matrix: TopoMatrix) -> str:
    """nvidia-smi's exact whitespace: a tab before and between headers, tab after each cell."""
    labels = matrix.labels
    lines = ["\t" + "\t".join([*labels, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"])]
    for gpu in matrix.gpus:
        cells = [_cell(matrix.cells[gpu.label][c]) for c in labels]
        lines.append("\t".join([gpu.label, *cells, matrix.cpu_affinity[gpu.label],
                                matrix.numa_affinity[gpu.label], "", "N/A"]))
    for nic in matrix.nics:
        lines.append("\t".join([nic.label, *(_cell(matrix.cells[nic.label][c]) for c in labels)]))
    lines += ["", "Legend:", "", *LEGEND]
    if matrix.nics:
        lines += ["", "NIC Legend:", "", *(f"  {n.label}: {n.name}" for n in matrix.nics)]
        # After nvidia-smi's own blocks and not in their "NICn:" form, so tools that parse
        # its layout still can.
        lines += ["", "Roles of the NICs (clusterdiag):", "",
                  *(f"  {n.name} ({n.label}): {n.role}" + (f", {n.role_reason}" if n.role_reason
                                                           else "") for n in matrix.nics)]
    return "\n".join(lines) + "\n"


_STYLES = {"X": "2", "PIX": "32", "PXB": "32", "PHB": "33", "NODE": "33", "SYS": "31"}
SHORT_LEGEND = ("X self, NV# bonded NVLinks, PIX at most one PCIe bridge, PXB several PCIe "
                "bridges, PHB through a PCIe host bridge, NODE between host bridges in one "
                "NUMA node, SYS across NUMA nodes")


def _painted(value: str, cell: int, colour: bool) -> str:
    text = value.center(cell)
    style = "36" if value.startswith("NV") else _STYLES.get(value)
    return f"\x1b[{style}m{text}\x1b[0m" if colour and style else text


def render_wrapped(matrix: TopoMatrix, width: int, colour: bool = False) -> str:
    """For a terminal of ``width`` columns: the matrix in blocks of whole columns, each
    block with the row labels again, so no label or class is ever cut; then the NIC
    legend and a one-line legend of the classes."""
    rows = [*matrix.gpus, *matrix.nics]
    columns: list[tuple[str, list[str]]] = [
        (col, [matrix.cells[row.label][col] for row in rows]) for col in matrix.labels]
    columns += [(name, [values.get(row.label, "") for row in rows]) for name, values in
                (("CPU Affinity", matrix.cpu_affinity), ("NUMA Affinity", matrix.numa_affinity))]
    side = max(len(row.label) for row in rows) + 2
    blocks: list[list[tuple[str, list[str]]]] = [[]]
    used = side
    for column in columns:
        cell = max(len(column[0]), *(len(v) for v in column[1])) + 2
        if blocks[-1] and used + cell > width:
            blocks.append([])
            used = side
        blocks[-1].append(column)
        used += cell
    lines: list[str] = []
    for block in blocks:
        sized = [(name, values, max(len(name), *(len(v) for v in values)) + 2)
                 for name, values in block]
        if lines:
            lines.append("")
        lines.append((" " * side + "".join(name.center(c) for name, _, c in sized)).rstrip())
        for i, row in enumerate(rows):
            lines.append((row.label.ljust(side) + "".join(
                _painted(values[i], c, colour) for _, values, c in sized)).rstrip())
    if matrix.nics:
        lines += ["", "NIC Legend:", *nic_legend(matrix).splitlines()]
    lines += ["", *textwrap.wrap("Legend: " + SHORT_LEGEND, width)]
    return "\n".join(lines) + "\n"


def nic_legend(matrix: TopoMatrix) -> str:
    return "\n".join(f"  {n.label}: {n.name} ({n.role}" + (f": {n.role_reason})" if n.role_reason
                                                           else ")") for n in matrix.nics)
