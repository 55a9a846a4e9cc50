"""``qualify --from-logs FILE...``: saved tool outputs judged as if qualify had run them.

Each file is one "node" of the judgement, named by its file name, so the report says per
file which tool printed it, the figure it judged and the verdict. Files are read bounded
(a log is input from elsewhere: hostile until parsed); a file no parser recognises, or one
that cannot be read, is an ``error`` finding naming the file, and the rest are still judged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ...checks.core.finding import Action, Finding, Status
from ...checks.profiles.profile import Profile
from ...checks.qualify.judge import Judgement, StragglerRule, expectations, judge
from ..model.qualify import ToolRun
from . import parsers
from .parsers import nccl
from .run import assign_tests

MAX_BYTES = 16 << 20
_TEST_OF_TOOL = {"perftest": "nic", "nvbandwidth": "nvbandwidth", "dcgmi": "dcgm",
                 "gpu_burn": "gpu_compute"}


@dataclass
class LogResult:
    runs: list[ToolRun]
    judgement: Judgement
    names: dict[str, str]  # display name -> path


def read_log(path: Path) -> str:
    with path.open("rb") as handle:
        data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ValueError(f"larger than {MAX_BYTES >> 20} MiB")
    return data.decode("utf-8", errors="replace")


def _name(path: Path, taken: Mapping[str, str]) -> str:
    name = path.name or str(path)
    return name if name not in taken else str(path)


def judge_logs(paths: list[Path], profile: Profile | None, rule: StragglerRule) -> LogResult:
    runs: list[ToolRun] = []
    names: dict[str, str] = {}
    unreadable: dict[str, Finding] = {}
    for path in paths:
        name = _name(path, names)
        names[name] = str(path)
        try:
            text = read_log(path)
        except (OSError, ValueError) as exc:
            why = getattr(exc, "strerror", None) or str(exc)
            unreadable[name] = Finding(Status.ERROR, "node", f"cannot read the log: {why}",
                                       str(path), None, Action.INVESTIGATE, "qualify.logs")
            continue
        tool = parsers.detect(text)
        if tool is None:
            launcher = parsers.launcher_error(text)
            message = ("the launcher failed before any tool output" if launcher
                       else "not the output of a tool qualify reads (nccl-tests, perftest, "
                            "nvbandwidth, dcgmi diag, gpu_burn)")
            unreadable[name] = Finding(Status.ERROR, "node", message, launcher or str(path),
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
    judgement = judge(runs, profile_names, expect, rule, repeatable=False)
    for name, finding in unreadable.items():
        judgement.findings[name] = [finding]
    return LogResult(runs, judgement, names)
