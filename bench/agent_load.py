"""The agent's cost on a node: RSS and CPU over a minute at a 5 s interval on simulated
dgx-h100, and /metrics latency (median, p99 over 1,000 requests), each beside
``python3 -c pass`` measured in the same run.

    .venv/bin/python bench/agent_load.py [--quick] [--json]

--quick watches for 15 s and sends 200 requests (a smoke run).
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil
from common import Figure, emit, python_start_s

INTERVAL_S = 5


def python_baseline() -> tuple[float, float]:
    """RSS (MB) and CPU seconds of ``python3 -c pass``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return after.ru_maxrss / 1024, cpu


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    watch_s, requests = (15, 200) if quick else (60, 1000)
    start_s = python_start_s()
    py_rss, py_cpu = python_baseline()
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        proc = subprocess.Popen(
            [sys.executable, "-m", "clusterdiag.agent", "agent", "--simulate", "dgx-h100",
             "--interval", str(INTERVAL_S), "--state-dir", str(state), "--listen",
             "127.0.0.1:0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while not (state / "report.json").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            url = f"http://{json.loads((state / 'agent.json').read_text())['listen']}/metrics"
            agent = psutil.Process(proc.pid)
            cpu0 = agent.cpu_times()
            kids0 = sum(sum(c.cpu_times()[:2]) for c in agent.children())
            peak = 0.0
            started = time.monotonic()
            while time.monotonic() - started < watch_s:
                rss = agent.memory_info().rss + sum(c.memory_info().rss
                                                    for c in agent.children())
                peak = max(peak, agent.memory_info().rss / 2**20)
                total = rss / 2**20
                time.sleep(0.5)
            wall = time.monotonic() - started
            cpu1 = agent.cpu_times()
            kids1 = sum(sum(c.cpu_times()[:2]) for c in agent.children())
            used = (cpu1.user + cpu1.system + cpu1.children_user + cpu1.children_system
                    - cpu0.user - cpu0.system - cpu0.children_user - cpu0.children_system
                    + kids1 - kids0)
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            latencies = []
            for _ in range(requests):
                t = time.perf_counter()
                with opener.open(url, timeout=10) as resp:
                    resp.read()
                latencies.append(time.perf_counter() - t)
        finally:
            proc.terminate()
            proc.wait(30)
    median = statistics.median(latencies)
    p99 = sorted(latencies)[max(0, int(len(latencies) * 0.99) - 1)]
    emit([
        Figure(f"agent RSS peak (main process, {watch_s} s at {INTERVAL_S} s interval)",
               round(peak, 1), "MB", "<= 60 MB", "python3 -c pass RSS", round(peak / py_rss, 1)),
        Figure("agent + XID listener RSS, summed (shared pages twice)", round(total, 1), "MB", "",
               "python3 -c pass RSS", round(total / py_rss, 1)),
        Figure(f"agent CPU share over {watch_s} s", round(100 * used / wall, 2), "% of one core",
               "", "python3 -c pass CPU", round(used / max(py_cpu, 1e-3), 1)),
        Figure(f"/metrics latency median ({requests} requests)", round(median * 1000, 2), "ms",
               "", "python3 -c pass", round(median / start_s, 3)),
        Figure(f"/metrics latency p99 ({requests} requests)", round(p99 * 1000, 2), "ms", "",
               "python3 -c pass", round(p99 / start_s, 3)),
        Figure("python3 -c pass", round(start_s * 1000, 1), "ms"),
    ])


if __name__ == "__main__":
    main()
