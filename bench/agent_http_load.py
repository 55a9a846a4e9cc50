"""The agent's HTTP API under load: 200 concurrent keep-alive clients for 10 s against
/metrics and /v1/report of a simulated dgx-h100 agent (its own process, loopback), with
the agent's RSS before, at its peak and after a settle period, beside ``python3 -c pass``
measured in the same run. The clients share the machine's CPUs with the agent, as a
co-located scraper would.

    .venv/bin/python bench/agent_http_load.py [--quick] [--json]

--quick runs the 200 clients for 3 s and settles for 5 s (a smoke run).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import Figure, emit, fail, module_note, python_start_s

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the load driver in tests/
from tests.integration.http_load import hammer, rss_kib

CLIENTS = 200
INTERVAL_S = 5


def _start(state: Path) -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "clusterdiag.agent", "agent", "--simulate", "dgx-h100",
         "--interval", str(INTERVAL_S), "--state-dir", str(state), "--listen", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (state / "report.json").exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            fail("agent did not start")
        time.sleep(0.05)
    return proc, f"http://{json.loads((state / 'agent.json').read_text())['listen']}"


def main() -> None:
    print(module_note(), file=sys.stderr)
    quick = "--quick" in sys.argv[1:]
    seconds, settle_s = (3.0, 5.0) if quick else (10.0, 15.0)
    start_s = python_start_s()
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = _start(Path(tmp) / "state")
        try:
            hammer(url, ["/metrics", "/v1/report"], 4, 1.0)  # warm: first render, imports
            time.sleep(2.0)
            baseline = rss_kib(proc.pid)
            peak = [baseline]
            done = threading.Event()

            def sample() -> None:
                while not done.wait(0.25):
                    peak.append(rss_kib(proc.pid))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            result = hammer(url, ["/metrics", "/v1/report"], CLIENTS, seconds)
            done.set()
            sampler.join()
            time.sleep(settle_s)
            after = rss_kib(proc.pid)
            if proc.poll() is not None or not result.requests:
                fail(f"the agent served {result.requests} requests (exit {proc.poll()})")
        finally:
            proc.terminate()
            proc.wait(30)
    load = f"{CLIENTS} clients x {seconds:g} s"
    emit([
        Figure(f"agent HTTP requests served ({load})", round(result.requests / result.seconds),
               "req/s", "", "1 / python3 -c pass", round(result.requests / result.seconds
                                                         * start_s, 1)),
        Figure(f"agent HTTP errors ({load})", sum(result.errors.values()), "requests", "0"),
        Figure(f"agent HTTP latency median ({load})", round(result.median_ms, 1), "ms", "",
               "python3 -c pass", round(result.median_ms / 1000 / start_s, 2)),
        Figure(f"agent HTTP latency p99 ({load})", round(result.p99_ms, 1), "ms", "",
               "python3 -c pass", round(result.p99_ms / 1000 / start_s, 2)),
        Figure("agent RSS before the load", round(baseline / 1024, 1), "MiB"),
        Figure(f"agent RSS peak ({load})", round(max(peak) / 1024, 1), "MiB"),
        Figure(f"agent RSS {settle_s:g} s after the load", round(after / 1024, 1), "MiB",
               "<= 1.15x before", "RSS before", round(after / baseline, 2)),
        Figure("python3 -c pass", round(start_s * 1000, 1), "ms"),
    ])


if __name__ == "__main__":
    main()
