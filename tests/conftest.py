"""Shared helpers: run the real command in a subprocess, the way users and Slurm do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


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

