"""Out of file descriptors at start: one line and exit 3, never an import's traceback.

The console script's module is loaded, then RLIMIT_NOFILE is lowered to the lowest
descriptor not open, so the next ``open`` (the lazy import of the CLI) fails with EMFILE,
as it does for a process started with every descriptor it may have already taken.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

STARVED = """
import itertools, os, resource, sys
from clusterdiag.agent.launch import main

def is_open(fd):
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True

lowest_free = next(fd for fd in itertools.count() if not is_open(fd))
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))
sys.argv = ["clusterdiag", *sys.argv[1:]]
main()
"""


def _starved(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", STARVED, *args], capture_output=True,
                          text=True, timeout=60, check=False)


@pytest.mark.parametrize("args", [("run", "--simulate", "dgx-h100"), ("--help",)])
def test_no_free_descriptor_is_one_line_and_exit_3(args: tuple[str, ...]) -> None:
    proc = _starved(*args)
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "clusterdiag: out of file descriptors (Too many open files); raise the limit "
        "(ulimit -n) or close what holds them"]
