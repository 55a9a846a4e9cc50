"""Simulated node trees: a process killed before its atexit ran must not leak its tree."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from clusterdiag.agent.sim.node import sweep_orphans


def test_trees_of_dead_processes_are_swept_and_live_ones_kept(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    dead = tmp_path / f"clusterdiag-sim-{gone}-n1-abc"
    live = tmp_path / f"clusterdiag-sim-{os.getpid()}-n1-def"
    unrelated = tmp_path / "clusterdiag-sim-notes"
    for folder in (dead, live, unrelated):
        (folder / "sys").mkdir(parents=True)
    sweep_orphans(tmp_path)
    assert not dead.exists()
    assert live.exists()
    assert unrelated.exists()
