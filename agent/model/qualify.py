"""What an active test measured, as plain data: the parse of one tool run and its figures.

``clusterdiag qualify`` runs the standard tools (nccl-tests, perftest, nvbandwidth, dcgmi
diag, gpu_burn) or reads their saved output; the parsers in ``agent/qualify/parsers`` turn
what the tools print into :class:`ToolRun` and the judging in ``checks/qualify/judge.py`` reads
only this module. Nothing here says whether a figure is good.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The tests a node qualification runs, by the check id its findings carry.
TESTS = ("allreduce", "allreduce_ring", "allreduce_net", "h2d", "d2h", "d2d", "hbm",
         "gpu_compute", "nic", "dcgm")
# The tests between nodes (agent/qualify/cross.py), by the check id their findings carry.
CROSS_TESTS = ("pairs", "rails", "scaling", "rack")


@dataclass
class Figure:
    """One measured number. ``values`` holds the first run and any repeat: the judged
    value is the best of them, so one noisy run convicts nothing."""

    node: str
    test: str  # one of TESTS
    component: str  # node, gpu3, gpu0-gpu3 (a pair), mlx5_4/1
    values: list[float]
    unit: str  # GB/s, Gb/s, Gflop/s
    tool: str
    detail: str = ""  # what exactly was measured ("busbw at 8589934592 B, in-place")
    line: int | None = None  # the line of the tool's output it was read from (1-based)

    @property
    def value(self) -> float:
        return max(self.values)

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "test": self.test, "component": self.component,
                "value": round(self.value, 3), "values": [round(v, 3) for v in self.values],
                "unit": self.unit, "tool": self.tool, "detail": self.detail}


@dataclass
class Evidence:
    """A line of the output that decides the verdict by itself, whatever the bandwidth:
    ``kind`` is ``fail`` (wrong results, NCCL/CUDA failure, IB completion error, a GPU
    marked faulty), ``error`` (the tool could not do what it was asked: its arguments, a
    feature its build lacks, CUDA or NVML failing to start — an error of the test, never
    the node's failure), ``setup`` (the tool's build or installation is wrong: a library
    the loader cannot find, nccl-tests without MPI; an error to fix, never the node's
    failure), ``warn`` (an NCCL WARN line) or ``socket`` (NCCL chose sockets)."""

    kind: str
    component: str
    text: str
    test: str = ""  # the test it belongs to when the tool runs several (dcgmi diag)


@dataclass
class ToolRun:
    """One tool's output and how it ended. ``returncode`` is None when it never ran to an
    exit status (not found, killed at its deadline) and for saved logs (unknown)."""

    tool: str  # nccl-tests | nccl | perftest | nvbandwidth | dcgmi | gpu_burn | unknown
    node: str
    test: str
    source: str  # the command line, or the log file it was read from
    returncode: int | None = None
    error: str | None = None  # could not run: not found, no answer within the deadline
    skipped: str | None = None  # the tool is not installed: why, and how to install it
    hung: bool = False
    from_log: bool = False
    complete: bool = False  # the tool's closing lines are there
    figures: list[Figure] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the parser could not use
    seconds: float = 0.0
    parse_s: float = 0.0  # of ``seconds``, how long reading the output took (bench/)
    # nccl-tests: the ranks of one job and the hosts they ran on, from its device list
    # (one "#  Rank" line per rank); None and () where the output lists no devices.
    ranks: int | None = None
    hosts: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "node": self.node, "test": self.test, "source": self.source,
                "returncode": self.returncode, "error": self.error, "skipped": self.skipped,
                "hung": self.hung,
                "from_log": self.from_log, "complete": self.complete,
                "seconds": round(self.seconds, 3),
                "figures": [f.to_dict() for f in self.figures],
                "evidence": [{"kind": e.kind, "component": e.component, "text": e.text[:300],
                              "test": e.test} for e in self.evidence],
                "notes": self.notes[:20]}


@dataclass(frozen=True)
class Expectation:
    """What the platform should reach in one test, and where the number comes from.
    ``floor`` fails a figure below it; ``expected`` is the healthy reference shown next
    to it. Either may be missing where nothing published gives it."""

    test: str
    unit: str
    source: str
    expected: float | None = None
    floor: float | None = None


@dataclass
class CrossRun:
    """One run between nodes in one round of the schedule: a two-node all-reduce
    (``pairs``), one rail's ``ib_write_bw`` from the first node to the second (``rails``),
    an all-reduce over 2, 4 … N nodes (``scaling``) or over a rack's trays (``rack``).
    ``stage`` is ``first``/``second`` (the pass of a pairing), ``ring``/``default`` (the
    algorithm of a scaling size) or ``rack`` (the whole rack)."""

    test: str  # one of CROSS_TESTS
    nodes: tuple[str, ...]
    round: int  # 1-based round of the schedule it ran in
    stage: str
    run: ToolRun

    @property
    def figure(self) -> Figure | None:
        return self.run.figures[0] if self.run.figures else None

    def to_dict(self) -> dict[str, Any]:
        figure = self.figure
        return {"test": self.test, "nodes": list(self.nodes), "round": self.round,
                "stage": self.stage, "tool": self.run.tool, "source": self.run.source[:300],
                "returncode": self.run.returncode, "error": self.run.error,
                "seconds": round(self.run.seconds, 3),
                "figure": None if figure is None else {
                    "component": figure.component, "value": round(figure.value, 3),
                    "unit": figure.unit, "detail": figure.detail}}
