"""``report merge`` of many simulated DGX H100 node reports against the least any merge
can cost: reading and parsing every file. At 100, 1,000 and 10,000 nodes, the wall time
of reading, summarising, the cluster checks and the terminal rendering, beside a serial
bare ``json.load`` of the same files (the anchor), the peak memory, and how the time grows
(an exponent near 1 is linear; goal: no worse than n log n). Goal at 10,000: <= 1.2x the
anchor and <= 1 GB peak RSS, on 2 cores.

    .venv/bin/python bench/merge_scale.py [--quick] [--json]

The reports are real pipeline output (one run per kind of node, renamed per node): 1%
with an NVLink down, 0.5% on another driver. Both the merge and the anchor run in fresh
processes of a plain (non-editable) install, timed from their first line, in alternating
pairs (PAIRS); the ratio is the median of the pairs' ratios, so load on the machine
colours both sides of each. The merge reports its own peak RSS and its workers' (it parses
on every CPU).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import Figure, emit, fail, growth, install_note, plain_install

from clusterdiag.agent.run.runner import RunOptions, run_node
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec

PAIRS = 3
ANCHOR = "serial bare json.load of the same files"
MERGE = """
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
# The anchor: every file read and parsed, one after another, nothing else.
BARE = """
import json, sys, time
from pathlib import Path
started = time.perf_counter()
count = 0
for path in sorted(Path(sys.argv[1]).glob("*.json")):
    with open(path, "rb") as handle:
        json.load(handle)
    count += 1
print(time.perf_counter() - started, count)
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


def _run(python: str, script: str, directory: str) -> list[str]:
    proc = subprocess.run([python, "-c", script, directory], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        fail(f"a timed run failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout.split()


def measure(python: str, directory: str, count: int) -> tuple[list[float], list[float], int,
                                                              int]:
    """Seconds of each anchor and merge run, alternating, and the largest peak RSS (KiB)
    of the merging process and of one of its workers."""
    anchors: list[float] = []
    merges: list[float] = []
    own = workers = 0
    for _ in range(PAIRS):
        seconds, parsed = _run(python, BARE, directory)
        if int(parsed) != count:
            fail(f"the anchor parsed {parsed} of {count} files")
        anchors.append(float(seconds))
        seconds, own_kib, workers_kib, nodes, _ = _run(python, MERGE, directory)
        if int(nodes) != count:
            fail(f"merged {nodes} of {count} node reports")
        merges.append(float(seconds))
        own, workers = max(own, int(own_kib)), max(workers, int(workers_kib))
    return anchors, merges, own, workers


def main() -> None:
    sizes = [100, 1000] if "--quick" in sys.argv else [100, 1000, 10_000]
    kinds = _kinds()
    figures: list[Figure] = []
    times: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="clusterdiag-merge-") as work, \
            plain_install(Path(work) / "install") as install:
        print(install_note(install), file=sys.stderr)
        for count in sizes:
            reports = Path(work) / f"reports-{count}"
            reports.mkdir()
            volume = write_reports(reports, count, kinds)
            anchors, merges, own_kib, workers_kib = measure(install.python, str(reports),
                                                            count)
            times[count] = statistics.median(merges)
            ratio = statistics.median(m / a for m, a in zip(merges, anchors, strict=True))
            goal = count == 10_000
            figures += [
                Figure(f"merge {count:,} node reports ({volume / 1e6:.0f} MB JSON)",
                       round(times[count], 2), "s", "<= 1.2x" if goal else "", ANCHOR,
                       round(ratio, 2)),
                Figure(f"merge {count:,}: {ANCHOR}", round(statistics.median(anchors), 2),
                       "s"),
                Figure(f"merge {count:,}: peak RSS, merging process", round(own_kib / 1024),
                       "MiB", "<= 1 GB" if goal else ""),
                Figure(f"merge {count:,}: peak RSS, largest parse worker",
                       round(workers_kib / 1024), "MiB"),
            ]
    emit(figures + growth("merge", times))


if __name__ == "__main__":
    main()
