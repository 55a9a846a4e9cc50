"""run_command: a program that outlives its deadline takes its children with it."""

from __future__ import annotations

import os
import time
from pathlib import Path

from clusterdiag.agent.read.sources import run_command
from tests.processes import still_running


def test_a_timed_out_wrapper_is_killed_with_its_children(tmp_path: Path) -> None:
    """An MPI-style wrapper whose child keeps our pipe open: the deadline still holds and
    no process of the session survives."""
    pidfile = tmp_path / "child.pid"
    wrapper = tmp_path / "wrapper.sh"
    wrapper.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {pidfile}\nwait\n")
    wrapper.chmod(0o755)
    # 3 s: time for a loaded machine to start the wrapper and its child before the kill
    started = time.monotonic()
    result = run_command([str(wrapper)], 3.0)
    assert time.monotonic() - started < 20.0  # the child would hold the pipe 60 s
    assert result.returncode is None
    assert result.error == f"{wrapper}: no answer within 3 s"
    child = int(pidfile.read_text())
    assert not still_running([child]), f"pid {child} outlived its session"


def test_output_and_exit_status_come_back(tmp_path: Path) -> None:
    result = run_command(["sh", "-c", "echo out; echo err >&2; exit 3"], 5.0)
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")


def test_a_missing_program_is_an_error_not_an_exception() -> None:
    result = run_command([f"/nonexistent/{os.getpid()}"], 1.0)
    assert result.returncode is None
    assert result.error is not None
