"""The tree stays ruff clean: part of the test command, so CI enforces it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def test_ruff_clean() -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff not installed")
    proc = subprocess.run([ruff, "check", str(REPO)], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout
