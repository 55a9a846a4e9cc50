"""The agent's cost on a node: idle CPU at the default interval (30 s) and RSS beside
node_exporter over the same window, RSS after an hour of collections and its slope, CPU
during an XID storm of 8 events/s, and /metrics latency (median, p99 over 1,000
requests), from a non-editable install of this checkout.

    .venv/bin/python bench/agent_load.py [--quick] [--json]

Idle is watched for 120 s (--quick: 30 s, and 200 requests), three processes side by side
so that the machine's load falls on all alike:

- the agent on the real host path: ``--root`` of a simulated dgx-h100 tree written once
  before (no simulator code in the agent's process), the real pynvml (no GPU here: NVML
  answers "library not found", so a real node adds its NVML calls in the worker);
- the agent on ``--simulate dgx-h100``: NVML answers, but the simulator runs inside the
  agent (it rewrites the tree's counter files before every sample), and is counted;
- node_exporter (Debian's prometheus-node-exporter, when on PATH) with its default
  collectors on this machine.

Each is scraped on ``/metrics`` every 30 s, as Prometheus would. CPU includes every
process an agent started (NVML worker, XID listener, the commands it ran). The agents
must have written their first report, stay alive, answer every scrape with their series,
and (storm) record the events; node_exporter must answer every scrape with its own; or
the benchmark fails.

An hour of collections at the default interval is 120 collections; the agent on
``--root`` runs them at a 1 s interval instead (--quick: 30 of them), with ``agent.keep_s``
scaled by the same 1/30 so that it runs the commands it keeps as often per collection as
at the defaults. Its RSS is sampled after each collection: the figure is the RSS after
the last one, and a leak shows as the slope over the second half (KiB per collection).
The floors beside it are this install's interpreter, measured in the same run, with
``aiohttp.web`` imported as any program imports it (aiohttp's ``__init__``, the client
with it) and with the agent's server imported (agent/daemon/server_only.py: the server
without the client). node_exporter's RSS is printed beside it when installed, or that it
is not.

Every agent runs with the environment the systemd unit gives it (``Environment=`` lines
of systemd/clusterdiag-agent.service: ``MALLOC_ARENA_MAX``), as on a node.
"""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import yaml
from common import REPO, Figure, emit, fail, install_note, plain_install, python_start_s

from clusterdiag.agent.sim.node import build, make_root
from clusterdiag.agent.sim.spec import NodeSpec

DEFAULT_INTERVAL_S = 30
DEFAULT_KEEP_S = 120.0  # agent.keep_s's default (agent/settings/config.py)
HOUR_COLLECTIONS = 3600 // DEFAULT_INTERVAL_S
HOUR_INTERVAL_S = 1.0
SCRAPE_EVERY_S = 30
STORM_PER_S = 8
NODE = "bench-node"
UNIT = REPO / "systemd" / "clusterdiag-agent.service"
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def python_baseline() -> tuple[float, float]:
    """RSS (MiB) and CPU seconds of ``python3 -c pass``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return after.ru_maxrss / 1024, cpu


@dataclass
class Watched:
    """One process watched: how to scrape it and what its scrape must hold."""

    name: str
    proc: subprocess.Popen[bytes]
    url: str
    series: bytes
    state: Path | None = None
    cpu0: float = 0.0
    peak_mb: float = 0.0
    scrapes: int = 0
    latencies: list[float] = field(default_factory=list)

    def cpu(self) -> float:
        """CPU seconds of the process and every process it started (reaped or live)."""
        me = psutil.Process(self.proc.pid)
        own = me.cpu_times()
        kids = sum(sum(c.cpu_times()[:2]) for c in me.children(recursive=True))
        return own.user + own.system + own.children_user + own.children_system + kids

    def scrape(self) -> float:
        started = time.perf_counter()
        with _OPENER.open(self.url, timeout=10) as resp:
            body = resp.read()
        took = time.perf_counter() - started
        if self.series not in body:
            fail(f"{self.name}: /metrics answered without its series ({self.series!r})")
        if self.proc.poll() is not None:
            fail(f"{self.name} exited {self.proc.returncode} while watched")
        self.scrapes += 1
        return took


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def unit_environment() -> dict[str, str]:
    """The environment the agent's unit sets (its ``Environment=KEY=VALUE`` lines,
    systemd.exec(5) "Environment="; the unit quotes none of its values), over ours."""
    env = dict(os.environ)
    for line in UNIT.read_text().splitlines():
        key, eq, value = line.removeprefix("Environment=").partition("=")
        if line.startswith("Environment=") and eq:
            env[key] = value
    return env


def start_agent(name: str, clusterdiag: str, source: list[str], state: Path) -> Watched:
    proc = subprocess.Popen(
        [clusterdiag, "agent", *source, "--interval", str(DEFAULT_INTERVAL_S), "--state-dir",
         str(state), "--listen", "127.0.0.1:0"], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, env=unit_environment())
    deadline = time.monotonic() + 180
    while not (state / "report.json").exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            fail(f"{name}: the agent wrote no report: exit {proc.poll()}")
        time.sleep(0.05)
    url = f"http://{json.loads((state / 'agent.json').read_text())['listen']}/metrics"
    return Watched(name, proc, url, b"clusterdiag_", state)


def start_node_exporter(program: str) -> Watched:
    address = f"127.0.0.1:{_free_port()}"
    proc = subprocess.Popen([program, f"--web.listen-address={address}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    watched = Watched("node_exporter", proc, f"http://{address}/metrics", b"node_cpu_seconds")
    deadline = time.monotonic() + 30
    while True:
        try:
            watched.scrape()
            return watched
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                fail(f"node_exporter did not answer on {address} (exit {proc.poll()})")
            time.sleep(0.05)


def watch(procs: list[Watched], watch_s: float) -> float:
    """Sample RSS twice a second and scrape each every SCRAPE_EVERY_S; the window's wall."""
    time.sleep(2.0)  # past the first collection's end
    for p in procs:
        p.cpu0 = p.cpu()
    started = time.monotonic()
    next_scrape = started
    while (now := time.monotonic()) - started < watch_s:
        if now >= next_scrape:
            for p in procs:
                p.scrape()
            next_scrape += SCRAPE_EVERY_S
        for p in procs:
            p.peak_mb = max(p.peak_mb, psutil.Process(p.proc.pid).memory_info().rss / 2**20)
        time.sleep(0.5)
    return time.monotonic() - started


def stop(procs: list[Watched]) -> None:
    for p in procs:
        if p.proc.poll() is None:
            p.proc.terminate()
    for p in procs:
        try:
            p.proc.wait(30)
        except subprocess.TimeoutExpired:
            p.proc.kill()


def storm_spec(path: Path, watch_s: float) -> str:
    """XIDs at 8/s on rotating GPUs, from 10 s after start for the whole watch."""
    count = int((watch_s + 30) * STORM_PER_S)
    path.write_text(yaml.safe_dump({
        "nodes": [{"names": "n1", "profile": "dgx-h100"}],
        "faults": [{"node": "n1", "kind": "xid", "gpu": i % 8, "code": 48 if i % 2 else 79,
                    "at_s": round(10 + i / STORM_PER_S, 3)} for i in range(count)]}))
    return str(path)


def rss_floor(python: str, module: str) -> float:
    """RSS (MiB) of this install's interpreter once it has imported ``module``, read from
    /proc/self/status (proc(5), VmRSS) so that nothing else is imported."""
    proc = subprocess.run([python, "-c", f"import {module}\n"
                           "for line in open('/proc/self/status'):\n"
                           "    if line.startswith('VmRSS:'): print(line.split()[1])"],
                          capture_output=True, text=True, check=True)
    return int(proc.stdout) / 1024


def _started_at(state: Path) -> str | None:
    try:
        return str(json.loads((state / "report.json").read_text())["started_at"])
    except (OSError, ValueError, KeyError):
        return None  # not there yet, or caught between its rename and our read


def hour_of_collections(clusterdiag: str, root: Path, work: Path, count: int
                        ) -> tuple[list[float], float]:
    """The agent on ``--root`` at HOUR_INTERVAL_S for ``count`` collections: its RSS (MiB)
    after each, and its peak over the run."""
    state = work / "hour"
    state.mkdir()
    config = work / "hour-config.json"  # JSON: read without PyYAML (settings/config.py)
    config.write_text(json.dumps({"agent": {
        "keep_s": DEFAULT_KEEP_S * HOUR_INTERVAL_S / DEFAULT_INTERVAL_S}}))
    proc = subprocess.Popen(
        [clusterdiag, "agent", "--config", str(config), "--root", str(root), "--node", NODE,
         "--interval", str(HOUR_INTERVAL_S), "--state-dir", str(state), "--listen",
         "127.0.0.1:0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=unit_environment())
    after: list[float] = []
    peak, seen = 0.0, None
    deadline = time.monotonic() + 180 + count * 10 * HOUR_INTERVAL_S
    try:
        while len(after) < count:
            if proc.poll() is not None or time.monotonic() > deadline:
                fail(f"agent --root at {HOUR_INTERVAL_S:g} s: {len(after)} of {count} "
                     f"collections, exit {proc.poll()}")
            rss = psutil.Process(proc.pid).memory_info().rss / 2**20
            peak = max(peak, rss)
            started = _started_at(state)
            if started is not None and started != seen:
                seen = started
                after.append(rss)
            time.sleep(0.1)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return after, peak


def slope_kib(rss_mb: list[float]) -> float:
    """Least-squares growth over the second half of the run, KiB per collection."""
    half = rss_mb[len(rss_mb) // 2:]
    if len(half) < 2:
        return 0.0
    fit = statistics.linear_regression(range(len(half)), [r * 1024 for r in half])
    return fit.slope


def _events(state: Path) -> int:
    path = state / "events.json"
    return len(json.loads(path.read_text())["events"]) if path.exists() else 0


def _exporter_version(program: str) -> str:
    proc = subprocess.run([program, "--version"], capture_output=True, text=True, check=False)
    words = (proc.stdout + proc.stderr).split()
    return words[2] if len(words) > 2 and words[1] == "version" else "(version unknown)"


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    idle_s, storm_s, requests = (30, 20, 200) if quick else (120, 60, 1000)
    hour = 30 if quick else HOUR_COLLECTIONS
    start_s = python_start_s()
    py_rss, py_cpu = python_baseline()
    exporter = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    work = Path(tempfile.mkdtemp(prefix="clusterdiag-bench-agent-"))
    figures: list[Figure] = []
    try:
        with plain_install(work / "install") as install:
            print(install_note(install), file=sys.stderr)
            root = work / "root"
            shutil.copytree(make_root(build(NodeSpec(NODE, "dgx-h100"))), root, symlinks=True)
            for name in ("host", "sim", "storm"):
                (work / name).mkdir()
            procs: list[Watched] = []
            try:
                procs.append(start_agent("agent --root", install.clusterdiag,
                                         ["--root", str(root), "--node", NODE], work / "host"))
                procs.append(start_agent("agent --simulate", install.clusterdiag,
                                         ["--simulate", "dgx-h100"], work / "sim"))
                if exporter:
                    procs.append(start_node_exporter(exporter))
                else:
                    print("node_exporter not on PATH (apt-get install prometheus-node-exporter):"
                          " no anchor for idle CPU", file=sys.stderr)
                wall = watch(procs, idle_s)
                cpu = {p.name: 100 * (p.cpu() - p.cpu0) / wall for p in procs}
                host = procs[0]
                for _ in range(requests):
                    host.latencies.append(host.scrape())
            finally:
                stop(procs)
            storm: list[Watched] = []
            try:
                storm.append(start_agent("agent storm", install.clusterdiag,
                                         ["--simulate", storm_spec(work / "storm.yaml",
                                                                   storm_s)], work / "storm"))
                storm_wall = watch(storm, storm_s)
                storm_cpu = 100 * (storm[0].cpu() - storm[0].cpu0) / storm_wall
            finally:
                stop(storm)
            events = _events(work / "storm")
            hour_rss, hour_peak = hour_of_collections(install.clusterdiag, root, work, hour)
            floor_mb = rss_floor(install.python, "aiohttp.web")
            server_mb = rss_floor(install.python, "clusterdiag.agent.daemon.server")
            if events < STORM_PER_S * storm_s / 2:
                fail(f"the storm recorded {events} events")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    window = f"{idle_s} s at the default {DEFAULT_INTERVAL_S} s interval, scraped every " \
             f"{SCRAPE_EVERY_S} s"
    anchor = "node_exporter" if exporter else ""
    base = cpu.get("node_exporter")
    base_mb = procs[2].peak_mb if exporter else py_rss
    for p in procs[:2]:
        how = "real host path: --root of a prebuilt dgx-h100 tree, no NVML here" \
            if p.name == "agent --root" else "--simulate dgx-h100, the simulator's work counted"
        figures += [
            Figure(f"agent CPU idle ({how}; {window})", round(cpu[p.name], 3), "% of one core",
                   "<= 0.5 %", anchor, None if not base else cpu[p.name] / base),
            Figure(f"agent RSS peak ({how})", round(p.peak_mb, 1), "MiB",
                   "<= 40 MiB", anchor or "python3 -c pass",
                   p.peak_mb / base_mb)]
    if exporter and base is not None:
        ne = procs[2]
        figures += [Figure(f"node_exporter {_exporter_version(exporter)} CPU (default "
                           f"collectors, same window)", round(base, 3), "% of one core"),
                    Figure("node_exporter RSS peak", round(ne.peak_mb, 1), "MiB")]
    else:
        figures.append(Figure("node_exporter (not installed here): RSS", math.nan, "MiB"))
    latencies = procs[0].latencies
    median = statistics.median(latencies)
    p99 = sorted(latencies)[max(0, int(len(latencies) * 0.99) - 1)]
    figures += [
        Figure(f"agent CPU during an XID storm of {STORM_PER_S}/s ({storm_s} s, {events} events "
               "recorded; --simulate)", round(storm_cpu, 2), "% of one core"),
        Figure("agent RSS peak during the storm", round(storm[0].peak_mb, 1), "MiB"),
        Figure(f"agent RSS after {hour} collections (real host path; an hour at the default "
               f"{DEFAULT_INTERVAL_S} s is {HOUR_COLLECTIONS}, run at {HOUR_INTERVAL_S:g} s)",
               round(hour_rss[-1], 1), "MiB", "<= 40 MiB", anchor or "python3 -c pass",
               hour_rss[-1] / base_mb),
        Figure(f"agent RSS peak over the {hour} collections", round(hour_peak, 1), "MiB"),
        Figure(f"agent RSS slope over the last {len(hour_rss) - len(hour_rss) // 2} of them",
               round(slope_kib(hour_rss), 1), "KiB per collection", "~0 (no leak)"),
        Figure("python3 with aiohttp.web imported (aiohttp's __init__, its client too)",
               round(floor_mb, 1), "MiB"),
        Figure("python3 with the agent's server imported (aiohttp.web without its client)",
               round(server_mb, 1), "MiB"),
        Figure(f"/metrics latency median ({requests} requests, agent --root)",
               round(median * 1000, 2), "ms", "", "python3 -c pass", median / start_s),
        Figure(f"/metrics latency p99 ({requests} requests, agent --root)",
               round(p99 * 1000, 2), "ms", "", "python3 -c pass", p99 / start_s),
        Figure("python3 -c pass", round(start_s * 1000, 1), "ms"),
        Figure("python3 -c pass CPU", round(py_cpu * 1000, 1), "ms"),
    ]
    print(f"load: {os.getloadavg()[0]:.1f} (1-min average at the end)", file=sys.stderr)
    emit(figures)


if __name__ == "__main__":
    main()
