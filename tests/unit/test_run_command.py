"""run_command: a program that outlives its deadline takes its children with it."""

from __future__ import annotations

import os
import subprocess
import sys
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


_LEAVES_A_SETSID_CHILD = """
import os, subprocess, sys
print("a complete log", flush=True)
child = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(60)"],
                         stdout=sys.stdout, stderr=sys.stderr)
open(sys.argv[1], "w").write(str(child.pid))
sys.exit(0)
"""


def test_a_program_that_exits_leaving_a_setsid_child_on_its_pipe_is_finished(
        tmp_path: Path) -> None:
    """What a tool prints and its exit status are the result once it exits, though a child
    that left its session still holds the output: the run is neither a hang nor cut short,
    and the child is killed."""
    pidfile = tmp_path / "child.pid"
    started = time.monotonic()
    result = run_command([sys.executable, "-c", _LEAVES_A_SETSID_CHILD, str(pidfile)], 30.0,
                         max_bytes=1 << 20)
    assert time.monotonic() - started < 15.0, "waited for the child's pipe, not the program"
    assert (result.returncode, result.error) == (0, None)
    assert result.stdout == "a complete log\n"
    assert result.stray == 1
    child = int(pidfile.read_text())
    assert not still_running([child]), f"pid {child} outlived the program that started it"


_LEAVES_A_DAEMON = """
import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c",
                          "import os, time; os.setsid(); time.sleep(60)"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         stdin=subprocess.DEVNULL)
open(sys.argv[1], "w").write(str(child.pid))
"""


def test_a_subreaper_kills_a_daemon_that_let_go_of_the_output(tmp_path: Path) -> None:
    """A leftover that called setsid and closed every descriptor holds nothing of ours: only
    adopting orphans (prctl PR_SET_CHILD_SUBREAPER) finds it. Run in a child interpreter:
    the test process must not become a subreaper for the rest of the suite."""
    pidfile = tmp_path / "daemon.pid"
    code = ("import sys; from clusterdiag.agent.read import sources\n"
            "assert sources.become_subreaper()\n"
            "r = sources.run_command([sys.executable, '-c', sys.argv[1], sys.argv[2]], 30.0, "
            "max_bytes=1 << 20)\nprint(r.returncode, r.stray)\n")
    proc = subprocess.run([sys.executable, "-c", code, _LEAVES_A_DAEMON, str(pidfile)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "1"]
    daemon = int(pidfile.read_text())
    assert not still_running([daemon]), f"pid {daemon} outlived the program that started it"
