"""``report merge`` of many simulated DGX H100 node reports: wall time and peak memory of
reading, summarising, the cluster checks and the terminal rendering, at 100, 1,000 and
10,000 nodes, and how the time grows (an exponent near 1 is linear; goal: no worse than
n log n). Goal at 10,000: <= 5 s and <= 1 GB peak RSS on 2 cores.

    .venv/bin/python bench/merge_scale.py [--quick] [--json]

The reports are real pipeline output (one run per kind of node, renamed per node): 1%
with an NVLink down, 0.5% on another driver. Each size runs in a fresh process, which
reports its own peak RSS and its workers' (the merge parses on every CPU).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from common import Figure, emit, fail, growth, module_note

from clusterdiag.agent.run.runner import RunOptions, run_node
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec

CHILD = """
import resource, sys, time
started = time.perf_counter()
from clusterdiag.reports.cluster_checks import ClusterSettings, judge
from clusterdiag.reports.fleet.merge import expand, merge_files
from clusterdiag.reports.render.terminal import render_terminal
report = judge(*merge_files(expand([sys.argv[1]])), ClusterSettings(), via="files")
text = render_terminal(report)
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(time.perf_counter() - started, own, workers, len(report.nodes), len(text.splitlines()))
"""


def _kinds() -> list[str]:
    """Compact JSON of a healthy node, one with an NVLink down, one on another driver."""
    out = []
    for faults in ([], [{"node": "k", "kind": "nvlink_down", "gpu": 3, "link": 7}],
                   [{"node": "k", "kind": "driver_mismatch", "version": "550.54.15"}]):
        env = env_for(NodeSpec("k", "dgx-h100", faults=faults))
        out.append(json.dumps(run_node(env, Config(), RunOptions(profile="dgx-h100"))
                              .to_dict(), separators=(",", ":")))
    return out


def write_reports(directory: Path, count: int, kinds: list[str]) -> int:
    size = 0
    for i in range(count):
        kind = kinds[1] if i % 100 == 7 else kinds[2] if i % 200 == 11 else kinds[0]
        name = f"gpu{i:05d}"
        text = kind.replace('"node":"k"', f'"node":"{name}"', 1)
        (directory / f"{name}.json").write_text(text)
        size += len(text)
    return size


def main() -> None:
    print(module_note(), file=sys.stderr)
    sizes = [100, 1000] if "--quick" in sys.argv else [100, 1000, 10_000]
    kinds = _kinds()
    figures: list[Figure] = []
    times: dict[int, float] = {}
    for count in sizes:
        with tempfile.TemporaryDirectory(prefix="clusterdiag-merge-") as tmp:
            volume = write_reports(Path(tmp), count, kinds)
            proc = subprocess.run([sys.executable, "-c", CHILD, tmp], capture_output=True,
                                  text=True, check=True)
        seconds, own_kib, workers_kib, nodes, _ = proc.stdout.split()
        if int(nodes) != count:
            fail(f"merged {nodes} of {count} node reports")
        times[count] = float(seconds)
        goal = count == 10_000
        figures += [
            Figure(f"merge {count:,} node reports ({volume / 1e6:.0f} MB JSON)",
                   round(float(seconds), 2), "s", "<= 5 s" if goal else ""),
            Figure(f"merge {count:,}: peak RSS, merging process", round(int(own_kib) / 1024),
                   "MiB", "<= 1 GB" if goal else ""),
            Figure(f"merge {count:,}: peak RSS, largest parse worker",
                   round(int(workers_kib) / 1024), "MiB"),
        ]
    emit(figures + growth("merge", times))


if __name__ == "__main__":
    main()
