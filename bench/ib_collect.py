"""Time to collect the InfiniBand side, and files read per snapshot: the real H100 tree
(8 ConnectX-7 + a BlueField-3 bond, tests/fixtures/ib/gpud-h100) and each simulated
profile, beside node_exporter's infiniband collector done the same way in Python.

    .venv/bin/python bench/ib_collect.py [--json]

node_exporter is a Go binary this machine's registries do not carry, so the anchor is an
equivalent reader written here: what its collector (prometheus/procfs,
sysfs/class_infiniband.go) reads, the way procfs's SysReadFile reads it: for each device
board_id, fw_ver and hca_type; for each port state, phys_state, rate and link_layer; then
every file of counters/ and hw_counters/, each with open, one read(), close. The Go
collector itself measured 4.5 ms on the real tree on this machine kind (recorded in
issue 15; not re-measurable here). A figure is printed only when the collection found every
device of the tree.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

from common import Figure, emit, fail, median_call, module_note

from clusterdiag.agent.collect import collect_snapshot
from clusterdiag.agent.model import SourceStats
from clusterdiag.agent.sim.layout import LAYOUTS
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sources import SourceEnv

RUNS = 15
REAL_H100 = Path(__file__).resolve().parents[1] / "tests/fixtures/ib/gpud-h100"


def _sys_read(path: str) -> bytes | None:
    """procfs's SysReadFile: open, one read() into a small buffer, close."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 128)
    except OSError:
        return None
    finally:
        os.close(fd)


def node_exporter_read(root: Path) -> int:
    """What node_exporter's infiniband collector reads; the number of files it read."""
    base = root / "sys/class/infiniband"
    read = 0
    for device in sorted(os.listdir(base)):
        top = f"{base}/{device}"
        for name in ("board_id", "fw_ver", "hca_type"):
            read += _sys_read(f"{top}/{name}") is not None
        for port in sorted(os.listdir(f"{top}/ports")):
            where = f"{top}/ports/{port}"
            for name in ("state", "phys_state", "rate", "link_layer"):
                read += _sys_read(f"{where}/{name}") is not None
            for group in ("counters", "hw_counters"):
                try:
                    names = os.listdir(f"{where}/{group}")
                except OSError:
                    continue
                for name in names:
                    read += _sys_read(f"{where}/{group}/{name}") is not None
    return read


def _figures(label: str, env: SourceEnv) -> list[Figure]:
    stats: list[SourceStats] = []
    devices = len(os.listdir(env.root / "sys/class/infiniband"))

    def once() -> None:
        snap = collect_snapshot(env, ["infiniband"], time.monotonic() + 30)
        stats.append(snap.sources["infiniband"])
        got = snap.infiniband
        if snap.sources["infiniband"].status != "ok" or len(got or []) != devices:
            fail(f"ib collect on {label}: {snap.sources['infiniband']}, "
                 f"{len(got or [])} of {devices} devices")

    once()  # the first sample also brings a simulated tree's counters up to date
    env.before_sample = []  # then the files stand still, as a real tree's do between reads
    anchor_files: list[int] = []
    walls, anchors = [], []
    for _ in range(RUNS):  # alternating, so a busy moment of the machine hits both
        walls.append(median_call(once, runs=1))
        anchors.append(median_call(lambda: anchor_files.append(node_exporter_read(env.root)),
                                   runs=1))
    wall, anchor = statistics.median(walls), statistics.median(anchors)
    last = stats[-1]
    if not anchor_files[-1]:
        fail(f"the node_exporter-equivalent reader read nothing under {env.root}")
    return [Figure(f"ib collect, {label}", round(wall * 1000, 2), "ms", goal="<= 2x",
                   baseline="node_exporter-equivalent reader", ratio=wall / anchor),
            Figure(f"node_exporter-equivalent reader, {label} ({anchor_files[-1]} files)",
                   round(anchor * 1000, 2), "ms"),
            Figure(f"ib files read per snapshot, {label}", last.files_read, "files"),
            Figure(f"ib devices, {label}", last.calls, "devices")]


def main() -> None:
    print(module_note(), file=sys.stderr)
    figures = _figures("real H100 tree (8 HCAs + bond)", SourceEnv(root=REAL_H100))
    for profile in sorted(LAYOUTS):
        env = env_for(NodeSpec(f"{profile}-bench", profile))
        if not (env.root / "sys/class/infiniband").is_dir():
            continue  # a profile without HCAs: nothing to time
        figures += _figures(f"simulated {profile}", env)
    emit(figures)


if __name__ == "__main__":
    main()
