"""The tree stays ruff clean and mypy --strict clean: part of the test command, so CI
enforces both."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def _tool(name: str) -> str:
    path = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(path).exists():
        pytest.skip(f"{name} not installed")
    return path


def test_ruff_clean() -> None:
    proc = subprocess.run([_tool("ruff"), "check", str(REPO)], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout


def test_mypy_strict_clean(tmp_path: Path) -> None:
    """mypy reads packages by path, and ours are mapped (agent/ is clusterdiag.agent): it
    runs over a tree of links laid out the way the import system sees the code."""
    package = tmp_path / "clusterdiag"
    package.mkdir()
    for folder in ("agent", "checks", "reports"):
        (package / folder).symlink_to(REPO / folder)
    proc = subprocess.run(
        [_tool("mypy"), "--config-file", str(REPO / "pyproject.toml"), "--namespace-packages",
         "--explicit-package-bases", "--cache-dir", str(tmp_path / "cache"), "-p",
         "clusterdiag"], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_bundle_tools_mypy_strict_clean(tmp_path: Path) -> None:
    """The bundle's builder and installer live outside the package (the installer runs
    before clusterdiag exists on the node) and are held to the same standard."""
    scripts = sorted(str(p) for p in (REPO / "deploy" / "bundle").glob("*.py"))
    proc = subprocess.run(
        [_tool("mypy"), "--config-file", str(REPO / "pyproject.toml"), "--cache-dir",
         str(tmp_path / "cache"), *scripts], cwd=tmp_path, capture_output=True, text=True,
        check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
