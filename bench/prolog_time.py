"""Wall time of ``clusterdiag prolog`` with a fresh agent report and without one, each as a
ratio to ``python3 -c pass`` (this venv's interpreter) measured in the same run.

    .venv/bin/python bench/prolog_time.py [--json] [--runs N]

Two ways to give the prolog a node. ``--root``: a simulated dgx-h100 tree written once,
read the way a real node's /sys and /proc are, with the real pynvml (no GPU here: NVML
answers "library not found" at once, so a real node adds its NVML time). ``--simulate``:
the simulator builds the node's tree and fake NVML on every run, which a real node never
pays. The prolog runs as Slurm runs it: no PATH, SLURMD_NODENAME and the job's variables.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import Figure, emit, median_wall, python_start_s

from clusterdiag.agent.sim.node import build, make_root
from clusterdiag.agent.sim.spec import NodeSpec

NODE = "bench-node"


def _runs() -> int:
    args = sys.argv[1:]
    return int(args[args.index("--runs") + 1]) if "--runs" in args else 9


def _fresh_report(state: Path) -> None:
    """A real report of the simulated node, dated now, where the agent would leave it."""
    proc = subprocess.run([sys.executable, "-m", "clusterdiag.agent", "run", "--simulate",
                           "dgx-h100", "--format", "json"], capture_output=True, text=True,
                          check=False)
    report = json.loads(proc.stdout)
    report["node"] = NODE
    (state / "report.json").write_text(json.dumps(report))
    (state / "agent.json").write_text(json.dumps(
        {"interval_s": 3600, "pid": 1, "listen": "127.0.0.1:9464"}))


def main() -> None:
    runs = _runs()
    work = Path(tempfile.mkdtemp(prefix="clusterdiag-bench-prolog-"))
    try:
        root = make_root(build(NodeSpec(NODE, "dgx-h100")))
        (work / "with").mkdir()
        (work / "without").mkdir()
        _fresh_report(work / "with")
        env = {"SLURMD_NODENAME": NODE, "SLURM_JOB_ID": "1", "SLURM_JOB_USER": "bench"}
        figures = []
        baseline = python_start_s(runs)
        figures.append(Figure("python3 -c pass", round(baseline * 1000, 1), "ms"))
        for source, flags in (("--root", ["--root", str(root)]),
                              ("--simulate", ["--simulate", "dgx-h100"])):
            for case, goal in (("with", "<= 3x"), ("without", "<= 6x")):
                config = work / f"{case}.yaml"
                config.write_text(json.dumps({"agent": {"state_dir": str(work / case)},
                                              "prolog": {"drain": False}}))
                argv = [sys.executable, "-m", "clusterdiag.agent", "prolog", *flags,
                        "--config", str(config)]
                wall = median_wall(argv, runs, env)
                figures.append(Figure(f"prolog {source}, {case} a fresh agent report",
                                      round(wall * 1000, 1), "ms", goal=f"{goal} python3",
                                      baseline="python3 -c pass", ratio=wall / baseline))
        emit(figures)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
