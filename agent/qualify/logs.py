"""``qualify --from-logs FILE...``: saved tool outputs judged as if qualify had run them.

Each file is one "node" of the judgement, named by its file name, so the report says per
file which tool printed it, the figure it judged and the verdict. Every file must be a
regular file of at most :data:`MAX_BYTES` (16 MiB: the longest real nccl-tests sweep is
well under 1 MiB): anything else — missing, unreadable, a directory, a FIFO, a device
such as ``/dev/null`` — is refused in one line before anything is judged (exit 2), and
opened without blocking (``O_NONBLOCK``, checked on the open descriptor:
agent/base/safefile.py), so a FIFO cannot hang the command. A file no parser recognises is
an ``error`` finding naming it, and the rest are still judged.

A log is judged by what it ran, read from the log itself: an nccl-tests all-reduce whose
device list (one ``#  Rank`` line per rank, parsers/nccl.py) spans two hosts is a two-node
test (``qualify.pairs``), one over a whole NVL72 rack's trays the rack test, one over more
hosts the scaling test, one host the node test; the report says which and why.
"""

from __future__ import annotations

import errno
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ...checks.core.finding import Action, Finding, Status
from ...checks.profiles.profile import Profile
from ...checks.qualify.cross import Graded, grade
from ...checks.qualify.judge import (
    CATALOG,
    TEST_NAMES,
    Judgement,
    StragglerRule,
    expectations,
    judge,
    run_findings,
)
from ...checks.qualify.sanity import screen
from ..base.errors import UsageError
from ..base.safefile import describe, read_regular
from ..model.qualify import CrossRun, Expectation, ToolRun
from . import parsers
from .parsers import nccl
from .run import assign_tests

MAX_BYTES = 16 << 20
_TEST_OF_TOOL = {"perftest": "nic", "nvbandwidth": "nvbandwidth", "dcgmi": "dcgm",
                 "gpu_burn": "gpu_compute"}
NVL72_GPUS = 72  # the GPUs of an NVL72 rack: its trays are 72 / the profile's gpu_count


@dataclass
class LogResult:
    runs: list[ToolRun]
    judgement: Judgement
    names: dict[str, str]  # display name -> path
    notes: list[str] = field(default_factory=list)  # per file: which expectation, and why
    cross: list[Graded] = field(default_factory=list)  # the logs of runs between nodes


def read_log(path: Path) -> str:
    """The log's text; a one-line UsageError for anything but a readable regular file of at
    most MAX_BYTES (never blocking on a FIFO or a device)."""
    try:
        data = read_regular(path, MAX_BYTES, follow=True)
    except FileNotFoundError:
        raise UsageError(f"--from-logs {path}: no such file") from None
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            raise UsageError(f"--from-logs {path}: larger than {MAX_BYTES >> 20} MiB, the "
                             "most qualify reads of a log") from None
        if exc.errno == errno.EINVAL:  # a FIFO, a device, a directory, a socket
            raise UsageError(f"--from-logs {path}: {describe(exc)}: qualify reads saved "
                             "logs from regular files only") from None
        raise UsageError(f"--from-logs {path}: cannot read: {describe(exc)}") from None
    return data.decode("utf-8", errors="replace")


def _name(path: Path, taken: Mapping[str, str]) -> str:
    name = path.name or str(path)
    return name if name not in taken else str(path)


def rack_trays(profile: Profile | None) -> int | None:
    """How many trays (hosts) make the profile's rack: NVL72 only."""
    if profile is None or not profile.nvl72 or not profile.gpu_count:
        return None
    return NVL72_GPUS // profile.gpu_count


def classify(run: ToolRun, profile: Profile | None) -> tuple[str | None, str]:
    """The test between nodes an nccl-tests all-reduce log is judged as (None: a node test)
    and the sentence that says why."""
    hosts, ranks = len(run.hosts), run.ranks
    if ranks is None:
        return None, "no device list in the log: judged as a single-node run"
    seen = f"{hosts} host{'s' if hosts != 1 else ''}, {ranks} ranks"
    if hosts < 2:
        return None, f"{seen}: judged as qualify.{run.test}"
    if run.test != "allreduce":
        return None, (f"{seen}: a {run.test} between nodes, for which no profile gives an "
                      "expectation: judged against other logs of it only")
    trays = rack_trays(profile)
    if trays is not None and hosts >= trays:
        return "rack", f"{seen}: a whole rack ({trays} trays): judged as qualify.rack"
    if hosts == 2:
        return "pairs", f"{seen}: judged as qualify.pairs"
    return "scaling", f"{seen}: judged as qualify.scaling"


def _expectation(test: str, expect: Mapping[str, Expectation]) -> tuple[Expectation | None,
                                                                         str]:
    """The expectation of ``test``; scaling, where the profile has none, takes the two-node
    figure (a Ring all-reduce's bus bandwidth stays flat as nodes are added)."""
    if test in expect or test != "scaling":
        return expect.get(test), ""
    if "pairs" in expect:
        return expect["pairs"], " against the two-node expectation (none for scaling)"
    return None, ""


def _cross_findings(test: str, graded: list[Graded], why: Mapping[str, str],
                    expectation: Expectation | None) -> dict[str, list[Finding]]:
    check, name = f"qualify.{test}", TEST_NAMES[test]
    out: dict[str, list[Finding]] = {}
    for g in graded:
        node = g.run.run.node
        if g.failed:
            out[node] = run_findings(g.run.run)
            continue
        said = f"({why[node]})"
        observed = {"value": None if g.value is None else round(g.value, 2),
                    "hosts": list(g.run.nodes), "ranks": g.run.run.ranks}
        expected = {"reference": g.reference, "basis": g.basis, "unit": g.unit,
                    "expected": expectation.expected if expectation else None,
                    "floor": expectation.floor if expectation else None,
                    "source": expectation.source if expectation else None}
        if g.status is Status.PASS:
            reference = "" if g.reference is not None else ", with nothing to judge it by"
            out[node] = [Finding(Status.PASS, g.component, f"{name}: {g.value:.1f} {g.unit}"
                                 f"{reference} {said}", observed, expected, Action.NONE,
                                 check)]
            continue
        value = "no figure" if g.value is None else f"{g.value:.1f} {g.unit}"
        action = CATALOG[check] if g.status is Status.FAIL else Action.INVESTIGATE
        out[node] = [Finding(g.status, g.component, f"{name}: {value}, {g.why} {said}",
                             observed, expected, action, check)]
    return out


def judge_logs(paths: list[Path], profile: Profile | None, rule: StragglerRule) -> LogResult:
    texts: dict[str, tuple[Path, str]] = {}
    names: dict[str, str] = {}
    for path in paths:  # every file read (or refused) before anything is judged
        name = _name(path, names)
        names[name] = str(path)
        texts[name] = (path, read_log(path))
    runs: list[ToolRun] = []
    unread: dict[str, Finding] = {}
    for name, (path, text) in texts.items():
        tool = parsers.detect(text)
        if tool is None:
            launcher = parsers.launcher_error(text)
            message = ("the launcher failed before any tool output" if launcher
                       else "not the output of a tool qualify reads (nccl-tests, NCCL's "
                            "own lines, perftest, nvbandwidth, dcgmi diag, gpu_burn)")
            unread[name] = Finding(Status.ERROR, "node", message, launcher or str(path),
                                   None, Action.INVESTIGATE, "qualify.logs")
            continue
        test = _TEST_OF_TOOL.get(tool) or (
            "allreduce" if nccl.collective(text, "collective") == "allreduce" else "collective")
        run = ToolRun(tool, name, test, str(path), from_log=True)
        parsers.parse(tool, text, run)
        assign_tests(run, test)
        runs.append(run)
    profile_names = {run.node: profile.name if profile else "" for run in runs}
    expect = {profile.name: expectations(profile)} if profile else {}
    own = expect.get(profile.name, {}) if profile else {}
    notes: list[str] = []
    node_runs: list[ToolRun] = []
    between: dict[str, list[ToolRun]] = {}
    why: dict[str, str] = {}
    for run in runs:
        if run.tool != "nccl-tests":
            node_runs.append(run)
            continue
        between_test, why[run.node] = classify(run, profile)
        if between_test is None:
            node_runs.append(run)
        else:
            between.setdefault(between_test, []).append(run)
    judgement = judge(node_runs, profile_names, expect, rule, repeatable=False)
    cross: list[Graded] = []
    for test, group in sorted(between.items()):
        expectation, against = _expectation(test, own)
        for run in group:
            run.test = test
            for figure in run.figures:
                figure.test = test
            why[run.node] += against
        screen(group, profile_names, {p: {test: expectation} for p in expect
                                      if expectation is not None})
        graded = grade([CrossRun(test, r.hosts, 1, "rack" if test == "rack" else "first", r)
                        for r in group], expectation, rule)
        cross += graded
        judgement.findings.update(_cross_findings(test, graded, why, expectation))
    notes += [f"{name}: {why[name]}" for name in texts if name in why]
    for name, finding in unread.items():
        judgement.findings[name] = [finding]
    return LogResult(runs, judgement, names, notes, cross)
