"""Time to collect the InfiniBand side, and files read per snapshot: the real H100 tree
(8 ConnectX-7 + a BlueField-3 bond, tests/fixtures/ib/gpud-h100) and each simulated
profile, beside node_exporter's infiniband collector done the same way in Python.

    .venv/bin/python bench/ib_collect.py [--json]

The anchor is node_exporter's own infiniband collector when ``prometheus-node-exporter``
(Debian's package) or ``node_exporter`` is on PATH: started on the same tree
(``--path.sysfs``, every other collector off), scraped once per run alternating with our
collection, its figure is the time it reports for the collector
(``node_scrape_collector_duration_seconds{collector="infiniband"}``), which leaves out
HTTP and text encoding. Each scrape must report the collector succeeded and carry a series
for every device of the tree. Beside it, an equivalent reader written here, which runs
anywhere: what the collector (prometheus/procfs, sysfs/class_infiniband.go) reads, the way
procfs's SysReadFile reads it: for each device board_id, fw_ver and hca_type; for each
port state, phys_state, rate and link_layer; then every file of counters/ and
hw_counters/, each with open, one read(), close. A figure is printed only when the
collection found every device of the tree.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from common import Figure, emit, fail, median_call, module_note

from clusterdiag.agent.model import SourceStats
from clusterdiag.agent.read.sources import SourceEnv
from clusterdiag.agent.run.collect import collect_snapshot
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.state.layout import LAYOUTS

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


_DURATION = re.compile(
    r'^node_scrape_collector_duration_seconds\{collector="infiniband"\} (\S+)$', re.M)
_DEVICE = re.compile(r'^node_infiniband_\w+\{[^}]*device="([^"]+)"', re.M)


def node_exporter() -> str | None:
    return shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def exporter_on(program: str, root: Path) -> Iterator[str]:
    """node_exporter with only its infiniband collector, reading ``root``; its URL."""
    address = f"127.0.0.1:{_free_port()}"
    proc = subprocess.Popen([program, f"--path.sysfs={root / 'sys'}", "--path.procfs=/proc",
                             "--collector.disable-defaults", "--collector.infiniband",
                             f"--web.listen-address={address}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://{address}/metrics"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                _scrape(url)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    fail(f"{program} did not answer on {address}: "
                         f"{(proc.stderr.read() if proc.stderr else '')[-300:]}")
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _scrape(url: str) -> str:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as resp:
        body: str = resp.read().decode()
        return body


def exporter_seconds(url: str, devices: int) -> float:
    """node_exporter's own time for its infiniband collector in one scrape; fails the
    benchmark unless it succeeded and reported every device."""
    body = _scrape(url)
    found = _DURATION.search(body)
    seen = set(_DEVICE.findall(body))
    if 'node_scrape_collector_success{collector="infiniband"} 1' not in body or not found \
            or len(seen) != devices:
        fail(f"node_exporter's infiniband collector did not read the tree: {len(seen)} of "
             f"{devices} devices")
    return float(found.group(1))


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
    walls, anchors, exporter = [], [], []
    program = node_exporter()
    with exporter_on(program, env.root) if program else _no_exporter() as url:
        for _ in range(RUNS):  # alternating, so a busy moment of the machine hits all
            walls.append(median_call(once, runs=1))
            anchors.append(median_call(
                lambda: anchor_files.append(node_exporter_read(env.root)), runs=1))
            if url:
                exporter.append(exporter_seconds(url, devices))
    wall, anchor = statistics.median(walls), statistics.median(anchors)
    last = stats[-1]
    if not anchor_files[-1]:
        fail(f"the node_exporter-equivalent reader read nothing under {env.root}")
    figures = []
    if exporter:
        real = statistics.median(exporter)
        figures += [Figure(f"ib collect, {label}", round(wall * 1000, 2), "ms", goal="<= 2x",
                           baseline="node_exporter's infiniband collector", ratio=wall / real),
                    Figure(f"node_exporter {_exporter_version(program)} infiniband "
                           f"collector, {label}", round(real * 1000, 2), "ms")]
    return [*figures,
            Figure(f"ib collect, {label}", round(wall * 1000, 2), "ms", goal="<= 2x",
                   baseline="node_exporter-equivalent reader", ratio=wall / anchor),
            Figure(f"node_exporter-equivalent reader, {label} ({anchor_files[-1]} files)",
                   round(anchor * 1000, 2), "ms"),
            Figure(f"ib files read per snapshot, {label}", last.files_read, "files"),
            Figure(f"ib devices, {label}", last.calls, "devices")]


@contextmanager
def _no_exporter() -> Iterator[str]:
    yield ""


def _exporter_version(program: str | None) -> str:
    proc = subprocess.run([program or "node_exporter", "--version"], capture_output=True,
                          text=True, check=False)
    words = (proc.stdout + proc.stderr).split()
    return words[2] if len(words) > 2 and words[1] == "version" else "(version unknown)"


def main() -> None:
    print(module_note(), file=sys.stderr)
    program = node_exporter()
    print(f"anchor: node_exporter at {program}" if program else
          "node_exporter not on PATH: the anchor is the equivalent reader only "
          "(the Go collector was recorded earlier at 4.5 ms on the real tree)", file=sys.stderr)
    figures = _figures("real H100 tree (8 HCAs + bond)", SourceEnv(root=REAL_H100))
    for profile in sorted(LAYOUTS):
        env = env_for(NodeSpec(f"{profile}-bench", profile))
        if not (env.root / "sys/class/infiniband").is_dir():
            continue  # a profile without HCAs: nothing to time
        figures += _figures(f"simulated {profile}", env)
    emit(figures)


if __name__ == "__main__":
    main()
