"""The agent's cost on a node, simulated dgx-h100: RSS and CPU idle at the default interval
(30 s), the same during an XID storm of 8 events/s, and /metrics latency (median, p99
over 1,000 requests), each beside ``python3 -c pass`` measured in the same run.

    .venv/bin/python bench/agent_load.py [--quick] [--json]

--quick watches for 20 s and sends 200 requests (a smoke run). node_exporter, the issue's
anchor for idle CPU, is a Go binary not in these machines' registries; ``python3 -c pass``
stands beside. The agent must have written its first report, stay alive, answer every
/metrics request with clusterdiag's series and (storm) record the events, or the
benchmark fails.
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
from typing import Any

import psutil
import yaml
from common import Figure, emit, fail, module_note, python_start_s

DEFAULT_INTERVAL_S = 30
STORM_PER_S = 8


def python_baseline() -> tuple[float, float]:
    """RSS (MB) and CPU seconds of ``python3 -c pass``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return after.ru_maxrss / 1024, cpu


def _cpu(agent: psutil.Process) -> float:
    """CPU seconds of the agent and every process it started (listener, NVML worker)."""
    own = agent.cpu_times()
    kids = sum(sum(c.cpu_times()[:2]) for c in agent.children(recursive=True))
    return own.user + own.system + own.children_user + own.children_system + kids


def watch(spec: str, tmp: Path, watch_s: float, requests: int = 0) -> dict[str, Any]:
    """Start an agent on ``spec``, wait for its first report, then watch it."""
    state = tmp / "state"
    proc = subprocess.Popen(
        [sys.executable, "-m", "clusterdiag.agent", "agent", "--simulate", spec,
         "--interval", str(DEFAULT_INTERVAL_S), "--state-dir", str(state), "--listen",
         "127.0.0.1:0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (state / "report.json").exists():
            if time.monotonic() > deadline or proc.poll() is not None:
                fail(f"the agent wrote no report: exit {proc.poll()}")
            time.sleep(0.05)
        time.sleep(2.0)  # past the first collection's end
        agent = psutil.Process(proc.pid)
        cpu0, peak, started = _cpu(agent), 0.0, time.monotonic()
        while time.monotonic() - started < watch_s:
            peak = max(peak, agent.memory_info().rss / 2**20)
            time.sleep(0.5)
        used, wall = _cpu(agent) - cpu0, time.monotonic() - started
        url = f"http://{json.loads((state / 'agent.json').read_text())['listen']}/metrics"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        latencies = []
        for _ in range(requests):
            t = time.perf_counter()
            with opener.open(url, timeout=10) as resp:
                body = resp.read()
            latencies.append(time.perf_counter() - t)
            if b"clusterdiag_" not in body:
                fail("/metrics answered without clusterdiag's series")
        if proc.poll() is not None:
            fail(f"the agent exited {proc.returncode} while watched")
        events = json.loads((state / "events.json").read_text())["events"] \
            if (state / "events.json").exists() else []
    finally:
        proc.terminate()
        proc.wait(30)
    return {"rss": peak, "cpu": 100 * used / wall, "latencies": latencies,
            "events": len(events)}


def storm_spec(path: Path, watch_s: float) -> str:
    """XIDs at 8/s on rotating GPUs, from 10 s after start for the whole watch."""
    count = int((watch_s + 30) * STORM_PER_S)
    path.write_text(yaml.safe_dump({
        "nodes": [{"names": "n1", "profile": "dgx-h100"}],
        "faults": [{"node": "n1", "kind": "xid", "gpu": i % 8, "code": 48 if i % 2 else 79,
                    "at_s": round(10 + i / STORM_PER_S, 3)} for i in range(count)]}))
    return str(path)


def main() -> None:
    print(module_note(), file=sys.stderr)
    quick = "--quick" in sys.argv[1:]
    watch_s, requests = (20, 200) if quick else (60, 1000)
    start_s = python_start_s()
    py_rss, py_cpu = python_baseline()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "idle").mkdir()
        idle = watch("dgx-h100", Path(tmp) / "idle", watch_s, requests)
        (Path(tmp) / "storm").mkdir()
        storm = watch(storm_spec(Path(tmp) / "storm.yaml", watch_s), Path(tmp) / "storm",
                      watch_s)
    if storm["events"] < STORM_PER_S * watch_s / 2:
        fail(f"the storm recorded {storm['events']} events")
    latencies = idle["latencies"]
    median = statistics.median(latencies)
    p99 = sorted(latencies)[max(0, int(len(latencies) * 0.99) - 1)]
    interval = f"{watch_s} s at the default {DEFAULT_INTERVAL_S} s interval"
    emit([
        Figure(f"agent RSS peak (main process, {interval})", round(idle["rss"], 1), "MB",
               "<= 50 MB (aiohttp kept)", "python3 -c pass RSS", round(idle["rss"] / py_rss, 1)),
        Figure(f"agent CPU idle ({interval}, listener and workers included)",
               round(idle["cpu"], 2), "% of one core", "<= 0.5 %"),
        Figure(f"agent CPU during an XID storm of {STORM_PER_S}/s ({watch_s} s, "
               f"{storm['events']} events recorded)", round(storm["cpu"], 2), "% of one core"),
        Figure("agent RSS peak during the storm", round(storm["rss"], 1), "MB"),
        Figure(f"/metrics latency median ({requests} requests)", round(median * 1000, 2), "ms",
               "", "python3 -c pass", round(median / start_s, 3)),
        Figure(f"/metrics latency p99 ({requests} requests)", round(p99 * 1000, 2), "ms", "",
               "python3 -c pass", round(p99 / start_s, 3)),
        Figure("python3 -c pass", round(start_s * 1000, 1), "ms"),
        Figure("python3 -c pass CPU", round(py_cpu * 1000, 1), "ms"),
    ])


if __name__ == "__main__":
    main()
