"""qualify's runners read a tool's output within a byte cap (launch.MAX_OUTPUT_BYTES, 16 MiB): an
all_reduce_perf or ib_write_bw that floods its pipe (a debug flood, a wedged rank printing
garbage) is stopped with its process group and named as the tool's trouble — an error,
never a hang of its node — and never takes the qualification's memory."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from clusterdiag.agent.qualify.launch import command_runner, group_runner
from clusterdiag.agent.qualify.plan import Step
from clusterdiag.agent.qualify.run import result_run
from clusterdiag.checks.core.finding import Status
from clusterdiag.checks.qualify.judge import run_findings

FLOOD_MIB = 320  # well over the cap; finite, so that the test ends even where it is red


def _flood(tmp_path: Path) -> Path:
    """Garbage lines, then it stays (with a child holding the pipe) until killed."""
    script = tmp_path / "all_reduce_perf"
    script.write_text("#!/bin/sh\nsleep 3600 &\n"
                      f"head -c {FLOOD_MIB}M /dev/zero | tr '\\0' 'x' | fold -w 200\n"
                      "wait\n")
    script.chmod(0o755)
    return script


def _mpirun(tmp_path: Path) -> Path:
    """A stand-in mpirun: runs what follows its options (the guarded command) here."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mpirun = bin_dir / "mpirun"
    mpirun.write_text('#!/bin/sh\nwhile [ "$1" != timeout ]; do shift; done\nexec "$@"\n')
    mpirun.chmod(0o755)
    return bin_dir


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize("how", ["local", "group"])
def test_a_flooding_tool_is_cut_off_and_is_its_own_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    tool = _flood(tmp_path)
    before = _peak_mib()
    if how == "local":
        result = command_runner("local")("n1", [str(tool)], {}, 60.0)
    else:
        monkeypatch.setenv("PATH", f"{_mpirun(tmp_path)}:/usr/bin:/bin")
        result = group_runner("ssh")(["n1", "n2"], [str(tool)], {}, 60.0)
    assert result.returncode is None
    assert result.error is not None
    assert "printed more than" in result.error
    assert _peak_mib() - before < 128
    run = result_run(Step("pairs", "nccl-tests", (str(tool),), deadline_s=60.0), "n1",
                     result, 1.0)
    assert not run.hung
    (finding,) = run_findings(run)
    assert finding.status is Status.ERROR
    assert "more than" in str(finding.observed)
