"""The real gpu_burn (built by ``python -m dev.tools build``) against qualify's check of what it
printed back (agent/qualify/parsers/gpuburn.py ``as_asked``), run on this GPU-less machine
with the stand-in driver of tests/integration/test_real_tools.py: the planned command line
is accepted as asked (what follows is CUDA failing to start: an error, never a verdict),
and a command line whose compare path holds one of gpu_burn's substring options, or that
lacks the seconds, is an error naming what it used against what was asked."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clusterdiag.agent.qualify.run import result_run
from clusterdiag.agent.read.sources import CommandResult
from clusterdiag.checks.core.finding import Action, Status
from clusterdiag.checks.core.levels import Level
from clusterdiag.checks.qualify.judge import run_findings
from tests.integration.test_real_tools import (
    TRAPS,
    built,
    fake_driver,
    need,
    real_argv,
    run,
    steps,
)

__all__ = ["fake_driver"]  # the module-scoped fixture, used here by name


def _judged(argv: list[str], fake: Path, cwd: Path) -> tuple[str, list[tuple[Status, Action,
                                                                             str]]]:
    step = steps("gpu_burn", Level.QUICK, built())[0]
    proc = run(argv, {"LD_LIBRARY_PATH": str(fake)}, cwd=cwd)
    tool_run = result_run(step.__class__(step.test, step.tool, tuple(argv), step.env,
                                         step.deadline_s, tests=step.tests),
                          "node", CommandResult(argv, proc.returncode, proc.stdout,
                                                proc.stderr), 1.0)
    text = proc.stdout + proc.stderr
    return text, [(f.status, f.action, f"{f.message}: {f.observed}")
                  for f in run_findings(tool_run)]


def test_the_planned_gpu_burn_is_accepted_as_asked(fake_driver: Path, tmp_path: Path) -> None:
    tools = built()
    need("gpu_burn")
    argv = real_argv(steps("gpu_burn", Level.QUICK, tools)[0].argv, tools)
    text, findings = _judged(argv, fake_driver, tmp_path)
    assert "Using compare file: " in text, text
    assert not [f for f in findings if "did not run as asked" in f[2]], findings
    assert all(s not in (Status.PASS, Status.FAIL) and a is not Action.DRAIN
               for s, a, _ in findings), findings


@pytest.mark.parametrize("folder", sorted(TRAPS))
def test_a_compare_path_gpu_burn_misreads_is_an_error_naming_it(
        folder: str, fake_driver: Path, tmp_path: Path) -> None:
    where = tmp_path / folder
    where.mkdir()
    shutil.copy2(need("gpu_burn_compare"), where / "compare.fatbin")
    argv = [str(need("gpu_burn")), "-d", "-tc", "-c", str(where / "compare.fatbin"), "5"]
    text, findings = _judged(argv, fake_driver, tmp_path)
    assert {(s, a) for s, a, _ in findings} == {(Status.ERROR, Action.INVESTIGATE)}, (
        findings, text)
    assert "gpu_burn did not run as asked" in findings[0][2], findings


def test_gpu_burn_without_its_seconds_is_an_error(fake_driver: Path, tmp_path: Path) -> None:
    argv = [str(need("gpu_burn")), "-d", "-tc", "-c", str(need("gpu_burn_compare"))]
    text, findings = _judged(argv, fake_driver, tmp_path)
    assert "Run length not specified" in text, text
    assert {s for s, _, _ in findings} == {Status.ERROR}, findings
    assert "no seconds" in findings[0][2], findings
