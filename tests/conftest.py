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
# compile every module it imports from source again, about a quarter of a CLI run's CPU.
# The cache lives outside the checkout (PYTHONPYCACHEPREFIX, docs.python.org/3/using/
# cmdline.html), which the workers and every child process inherit; Python still checks
# each .pyc against its source's mtime and size, so an edited module is compiled afresh.
_BYTECODE_ENV = "PYTHONPYCACHEPREFIX"


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or os.environ.get(_BYTECODE_ENV):
        return  # an xdist worker (the controller compiled), or the user chose a cache
    import compileall
    import tempfile

    cache = tempfile.mkdtemp(prefix="clusterdiag-pyc-")
    os.chmod(cache, 0o755)  # tests run some children as another user: they read it too
    config.stash[_PYC_DIR] = cache
    os.environ[_BYTECODE_ENV] = cache
    sys.pycache_prefix = cache
    for package in ("agent", "checks", "reports"):
        compileall.compile_dir(REPO / package, quiet=1)


def pytest_unconfigure(config: pytest.Config) -> None:
    cache = config.stash.get(_PYC_DIR, None)
    if cache is not None:
        import shutil

        shutil.rmtree(cache, ignore_errors=True)
        os.environ.pop(_BYTECODE_ENV, None)
        sys.pycache_prefix = None


_PYC_DIR = pytest.StashKey[str]()


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

