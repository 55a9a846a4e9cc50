"""NVML calls and wall time per snapshot for each simulated profile, and the time of a
`quick` run on simulated dgx-h100 against `python3 -c pass` on the same machine.

    .venv/bin/python bench/nvml_calls.py [--json]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from common import Figure, emit, fail, median_wall, module_note, python_start_s

from clusterdiag.agent.run.collect import collect_snapshot
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.state.layout import LAYOUTS

# The calls one snapshot may cost per GPU (tests/unit/test_nvml_calls.py holds every
# profile to its current figure).
CALL_GOALS = {"dgx-h100": "<= 30"}


def _judged(proc: subprocess.CompletedProcess[str]) -> str | None:
    """A run that judged the node: exit 0 or 1 with a report of its eight GPUs."""
    try:
        gpus = len(json.loads(proc.stdout)["inventory"]["gpus"])
    except (ValueError, KeyError, TypeError):
        return f"no report (exit status {proc.returncode})"
    return None if proc.returncode in (0, 1) and gpus == 8 else f"{gpus} GPUs in the report"


def main() -> None:
    print(module_note(), file=sys.stderr)
    figures = []
    for profile in sorted(LAYOUTS):
        env = env_for(NodeSpec(f"{profile}-bench", profile))
        snap = collect_snapshot(env, ["nvml"], time.monotonic() + 30)
        stats = snap.sources["nvml"]
        gpus = len(snap.nvml.gpus) if snap.nvml else 0
        if stats.status != "ok" or not gpus:
            fail(f"nvml collect on simulated {profile}: {stats}, {gpus} GPUs")
        figures.append(Figure(f"nvml calls per GPU, {profile}", stats.calls / max(gpus, 1),
                              "calls", goal=CALL_GOALS.get(profile, "")))
        figures.append(Figure(f"nvml collect, {profile} ({gpus} GPUs)",
                              round(stats.seconds * 1000, 1), "ms"))
    baseline = python_start_s()
    quick = median_wall([sys.executable, "-m", "clusterdiag.agent", "run", "--simulate",
                         "dgx-h100", "--format", "json"], ok=_judged)
    figures.append(Figure("python3 -c pass", round(baseline * 1000, 1), "ms"))
    figures.append(Figure("clusterdiag run --simulate dgx-h100 (quick)", round(quick * 1000, 1),
                          "ms", goal="", baseline="python3 -c pass",
                          ratio=quick / baseline))
    emit(figures)


if __name__ == "__main__":
    main()
