"""Shared helpers: run the real command in a subprocess, the way users and Slurm do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/ from today's output (review the diff in git)")


def run_cli(*args: str, timeout: float = 60, env: dict[str, str] | None = None,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "clusterdiag.agent", *args], capture_output=True,
                          text=True, timeout=timeout, env=full_env, input=stdin, check=False)

