"""Shared helpers: run the real command in a subprocess, the way users and Slurm do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


# The project's bytecode, compiled once per session: with PYTHONDONTWRITEBYTECODE set (as
# it is on this machine kind) and a fresh clone holding no __pycache__, every process the
# suite starts (hundreds of ``python -m clusterdiag.agent``, each xdist worker) would
# compile every project module it imports from source again, about a quarter of a CLI
# run's CPU. The variable stops Python writing bytecode as it imports, not reading it, so
# the controller writes it once, where Python looks (each package's __pycache__, ignored
# by git; not PYTHONPYCACHEPREFIX, which would hide the standard library's and the
# installed packages' bytecode from every process). Python checks each .pyc against its
# source's mtime and size, so a module edited later is compiled afresh.
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not sys.dont_write_bytecode:
        return  # an xdist worker (the controller compiled), or Python writes it anyway
    import compileall

    for package in ("agent", "checks", "reports"):
        compileall.compile_dir(REPO / package, quiet=1)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: the suite mostly waits (on child processes, sockets and deadlines), so
    twice as many workers as cores keep the CPU busy; ``CLUSTERDIAG_TEST_WORKERS`` overrides."""
    given = os.environ.get("CLUSTERDIAG_TEST_WORKERS")
    return int(given) if given else 2 * (os.cpu_count() or 1)


def run_cli(*args: str, timeout: float = 60, env: dict[str, str] | None = None,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "clusterdiag.agent", *args], capture_output=True,
                          text=True, timeout=timeout, env=full_env, input=stdin, check=False)

