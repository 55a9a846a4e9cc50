"""nvbandwidth's multi-node device-to-device copy test over an NVL72 rack: whether the
installed build has it, its command line, and what its matrix says of each GPU.

A build made with ``cmake -DMULTINODE=1`` runs under MPI, one process per GPU across the
trays of one NVLink domain (NVIDIA/nvbandwidth README, "Multinode benchmarks" and "Running
it on a cluster"; it also needs the IMEX service and channels, which the rack test checks
first). It has the same program name as the single-node build, so the program is the one
the node tests run (``qualify.tools.nvbandwidth``, else ``nvbandwidth`` on PATH) and its
multinode support is read from what ``--list`` prints on the rack's first tray: a
``<index>, multinode_<name>:`` line (output.cpp:70-77; the multinode testcases are added
to the list only in that build, nvbandwidth.cpp:100-114). A single-node build, a missing
program or one that cannot list is a note with the reason and the install hint, never a
tray's failure.

Judging reuses the node test's device-to-device rule (checks/qualify/judge.py): a GPU's
figure is the median of every copy it is in, read and written, across the rack (one slow
GPU is in all of its own pairs but in only two of each other GPU's); it fails below the
profile's ``d2d`` floor (an NVL72 GPU reaches every other GPU through the same NVLink5
switch trays, inside its tray or not) or more than ``fail_pct`` below the rack's median
of those figures, and warns more than ``warn_pct`` below it. A tray whose every GPU fails
is named as the tray.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ...checks.core.finding import Action, Finding, Status
from ...checks.qualify.judge import Judged, StragglerRule, grade, short_of_profile
from ...checks.qualify.sanity import Ceiling, impossible
from ..model.qualify import Expectation, Figure, ToolRun
from ..read.sources import CommandResult
from .parsers.nvbandwidth import multinode_matrix

TESTCASE = "multinode_device_to_device_memcpy_read_ce"
INSTALL = ("build nvbandwidth with its multinode testcases (github.com/NVIDIA/nvbandwidth: "
           "`cmake -DMULTINODE=1 .`, needs MPI and CUDA 12.3 with driver 550 or later) on "
           "every tray and point qualify.tools.nvbandwidth at it")
_LISTED = re.compile(r"^\d+, multinode_[a-z0-9_]+:$", re.MULTILINE)
_LIST_S = 30.0
CHECK = "qualify.rack"
NAME = "nvbandwidth multinode device-to-device read"


def list_argv(program: str) -> list[str]:
    return [program, "--list"]


def command(program: str) -> list[str]:
    return [program, "-t", TESTCASE]


def multinode_listed(text: str) -> bool:
    """Whether ``nvbandwidth --list`` lists the multinode read testcase."""
    return f", {TESTCASE}:" in text and bool(_LISTED.search(text))


def unsupported(result: CommandResult, head: str) -> str | None:
    """Why the program on ``head`` cannot run the test (from its ``--list``), or None."""
    if result.error is not None or result.returncode != 0:
        said = (result.error or result.stderr or result.stdout or "").strip()
        return (f"nvbandwidth --list on {head}: "
                f"{' '.join(said.split())[:200] or f'exit {result.returncode}'}")
    if not multinode_listed(result.stdout):
        return (f"the nvbandwidth on {head} lists no multinode testcase (a build without "
                "-DMULTINODE=1)")
    return None


@dataclass
class Gpu:
    """One rank's GPU and its figure: the median of its copies."""

    host: str
    gpu: int
    rank: int
    value: float
    copies: int


@dataclass
class Read:
    """What one run says: each rank's GPU with its figure, and what could not be used."""

    gpus: list[Gpu] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)  # the tool's own error lines


def _host(name: str, trays: Sequence[str]) -> str | None:
    """The tray a process line's host is: its name, or the tray whose short name it is
    (gethostname may give the fully qualified name where the tray is listed short)."""
    if name in trays:
        return name
    short = name.split(".", 1)[0]
    return next((t for t in trays if t.split(".", 1)[0] == short), None)


def read(text: str, trays: Sequence[str], head: str, bound: Ceiling | None = None) -> Read:
    """Each GPU's figure: the median of the cells of its row and its column. A cell no
    copy can give (above ``bound``, the device-to-device ceiling of checks/qualify/
    sanity.py, or not finite) says the run went wrong: it is evidence, and no GPU is
    judged on that run."""
    run = ToolRun("nvbandwidth", head, "rack", TESTCASE)
    ranks, cells = multinode_matrix(text, TESTCASE, run)
    out = Read(notes=list(run.notes), evidence=[e.text for e in run.evidence])
    for (a, b), value in sorted(cells.items()):
        why = impossible(value, bound)
        if why is not None:
            out.evidence.append(f"process {a} from process {b}: {value:g} GB/s: {why}"[:300])
            return out
    copies: dict[int, list[float]] = {}
    for (a, b), value in cells.items():
        copies.setdefault(a, []).append(value)
        copies.setdefault(b, []).append(value)
    for rank, (name, gpu) in sorted(ranks.items()):
        tray = _host(name, trays)
        if tray is None:
            out.notes.append(f"process {rank} ran on {name}, which is none of the rack's trays")
        elif copies.get(rank):
            out.gpus.append(Gpu(tray, gpu, rank, statistics.median(copies[rank]),
                                len(copies[rank])))
    return out


def _finding(j: Judged, gpu: Gpu, rack_median: float | None) -> Finding:
    exp = j.expectation
    expected = {"rack_median": None if rack_median is None else round(rack_median, 2),
                "unit": "GB/s", "floor": None if exp is None else exp.floor,
                "source": None if exp is None else exp.source}
    observed = {"value": round(gpu.value, 2), "rank": gpu.rank, "copies": gpu.copies}
    action = Action.DRAIN if j.status is Status.FAIL else Action.INVESTIGATE
    return Finding(j.status, f"gpu{gpu.gpu}", f"{NAME}: the GPU's copies are {j.why}",
                   observed, expected, action, CHECK)


def findings(result: Read, profiles: Mapping[str, str],
             floors: Mapping[str, Expectation | None], rule: StragglerRule
             ) -> tuple[dict[str, list[Finding]], list[Finding]]:
    """(each tray's findings, the cluster's): a slow GPU on its tray, a tray whose every
    GPU is slow as the tray, a pass for a tray whose GPUs all passed; a rack slow as a
    whole (its median below the floor) is one cluster finding, not eighteen drains."""
    figures = [Figure(g.host, "rack", f"gpu{g.gpu}", [g.value], "GB/s", "nvbandwidth",
                      f"median of its {g.copies} copies") for g in result.gpus]
    expect = {name: {"rack": exp} for name, exp in floors.items() if exp is not None}
    judged = grade(figures, profiles, expect, rule)
    by_tray: dict[str, list[tuple[Judged, Gpu]]] = {}
    for j, gpu in zip(judged, result.gpus, strict=True):
        by_tray.setdefault(gpu.host, []).append((j, gpu))
    out: dict[str, list[Finding]] = {}
    for tray, own in sorted(by_tray.items()):
        bad = [(j, g) for j, g in own if j.status is not Status.PASS]
        if not bad:
            out[tray] = [Finding(Status.PASS, "node", f"{NAME}: every GPU within "
                                 f"{rule.warn_pct:g} % of the rack's median", None, None,
                                 Action.NONE, CHECK)]
        elif len(own) > 1 and all(j.status is Status.FAIL for j, _ in own):
            worst = min(own, key=lambda pair: pair[1].value)
            found = _finding(*worst, worst[0].median)
            out[tray] = [Finding(Status.FAIL, "node", f"{NAME}: every GPU of the tray is "
                                 f"slow ({worst[0].why})", {g.gpu: round(g.value, 2)
                                                              for _, g in own},
                                 found.expected, Action.DRAIN, CHECK)]
        else:
            out[tray] = [_finding(j, g, j.median) for j, g in bad]
    cluster = []
    first = judged[0] if judged else None
    why = short_of_profile(first.median, first.expectation, rule) if first else None
    if first is not None and why is not None:
        cluster.append(Finding(Status.FAIL, "cluster", f"{NAME}: the rack is slow as a whole, "
                               f"its median {first.median:.1f} GB/s per GPU {why}",
                               {"median": round(first.median or 0.0, 2), "gpus": len(judged)},
                               {"floor": first.expectation.floor if first.expectation else None},
                               Action.INVESTIGATE, CHECK))
    return out, cluster
