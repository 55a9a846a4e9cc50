"""Time to collect the InfiniBand side, and files read per snapshot: the real H100 tree
(8 ConnectX-7 + a BlueField-3 bond, tests/fixtures/ib/gpud-h100) and each simulated
profile, beside a plain open/read of every file under /sys/class/infiniband of the same tree
(the collector reads fewer: it skips excluded devices' counters).

    .venv/bin/python bench/ib_collect.py [--json]
"""

from __future__ import annotations

import time
from pathlib import Path

from common import Figure, emit, files_under, median_call, raw_read_s

from clusterdiag.agent.collect import collect_snapshot
from clusterdiag.agent.model import SourceStats
from clusterdiag.agent.sim.layout import LAYOUTS
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sources import SourceEnv

REAL_H100 = Path(__file__).resolve().parents[1] / "tests/fixtures/ib/gpud-h100"


def _figures(label: str, env: SourceEnv) -> list[Figure]:
    stats: list[SourceStats] = []

    def once() -> None:
        snap = collect_snapshot(env, ["infiniband"], time.monotonic() + 30)
        stats.append(snap.sources["infiniband"])

    wall = median_call(once, runs=7)
    last = stats[-1]
    # The floor: the same tree's class directory read with bare open/read, every file once.
    files = files_under(env.root, "sys/class/infiniband")
    raw = raw_read_s(files, runs=7) if files else None
    return [Figure(f"ib collect, {label}", round(wall * 1000, 2), "ms",
                   baseline="raw read of the IB tree", ratio=wall / raw if raw else None),
            Figure(f"ib files read per snapshot, {label}", last.files_read, "files"),
            Figure(f"ib devices, {label}", last.calls, "devices")]


def main() -> None:
    figures = _figures("real H100 tree (8 HCAs + bond)", SourceEnv(root=REAL_H100))
    for profile in sorted(LAYOUTS):
        figures += _figures(f"simulated {profile}", env_for(NodeSpec(f"{profile}-bench",
                                                                     profile)))
    emit(figures)


if __name__ == "__main__":
    main()
