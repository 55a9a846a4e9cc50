"""NVML calls and wall time per snapshot for each simulated profile, and the time of a
`quick` run on simulated dgx-h100 against `python3 -c pass` on the same machine.

    .venv/bin/python bench/nvml_calls.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from clusterdiag.agent.collect import collect_snapshot
from clusterdiag.agent.sim.layout import LAYOUTS
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec


def _median_wall(argv: list[str], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=False)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    print(f"{'profile':16} {'gpus':>4} {'nvml calls':>10} {'per gpu':>8} {'nvml s':>8}")
    for profile in sorted(LAYOUTS):
        env = env_for(NodeSpec(f"{profile}-bench", profile))
        snap = collect_snapshot(env, ["nvml"], time.monotonic() + 30)
        stats = snap.sources["nvml"]
        gpus = len(snap.nvml.gpus) if snap.nvml else 0
        print(f"{profile:16} {gpus:>4} {stats.calls:>10} {stats.calls / max(gpus, 1):>8.1f} "
              f"{stats.seconds:>8.4f}")
    baseline = _median_wall([sys.executable, "-c", "pass"])
    quick = _median_wall([sys.executable, "-m", "clusterdiag.agent", "run", "--simulate",
                          "dgx-h100"])
    print(f"\npython3 -c pass: {baseline * 1000:.1f} ms; quick run on simulated dgx-h100: "
          f"{quick * 1000:.1f} ms (ratio {quick / baseline:.1f}x), median of 5")


if __name__ == "__main__":
    main()
