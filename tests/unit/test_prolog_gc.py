"""The prolog runs without the cyclic garbage collector (agent/launch.py): its passes over
what the imports allocate cost a tenth of the run. Only the prolog: the epilog and the
health check keep it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# A Slurm program through the console script's entry, with a config that is not there (the
# program spares the node and exits 0), then whether automatic collection is on.
PROBE = """
import gc, sys
from clusterdiag.agent.launch import main
sys.argv = ["clusterdiag", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(gc.isenabled())
"""


def _collecting(program: str, tmp_path: Path) -> str:
    proc = subprocess.run([sys.executable, "-c", PROBE, program, "--root", str(tmp_path),
                           "--config", str(tmp_path / "missing.yaml")],
                          capture_output=True, text=True, timeout=120, check=True)
    return proc.stdout.splitlines()[-1]


def test_only_the_prolog_runs_without_the_cyclic_collector(tmp_path: Path) -> None:
    assert {program: _collecting(program, tmp_path)
            for program in ("prolog", "epilog", "healthcheck")} == {
        "prolog": "False", "epilog": "True", "healthcheck": "True"}
