"""Gathering node reports over HTTP from many simulated agents on loopback: the wall time
of ``gather_agent`` (default concurrency 256, bearer token, real aiohttp client) at 100,
1,000 and 10,000 agents, and how it grows. Goal at 1,000: <= 10 s.

    .venv/bin/python bench/gather_scale.py [--quick] [--json]

The agents are a Fleet (agent/cluster/fleet.py) in another process: every node on its own
127.0.x.y address, one process serving all of them, so the gatherer's figures are its own
and not shared with the servers' CPU in one interpreter. Each node answers a real DGX H100
report (~50 KB of JSON).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from common import Figure, emit, fail, growth, module_note

from clusterdiag.reports.cluster_checks import ClusterSettings, judge
from clusterdiag.reports.fleet.gather import GatherSettings, gather_agent

TOKEN = "bench-token"
SERVER = """
import json, sys
from clusterdiag.agent.cluster.fleet import Fleet
from clusterdiag.agent.sim.spec import parse_spec
spec = parse_spec({"nodes": [{"names": sys.argv[1], "profile": "dgx-h100"}]}, "bench")
with Fleet(spec, token=sys.argv[2]) as fleet:
    print(json.dumps(fleet.urls), flush=True)
    sys.stdin.read()
"""


def gather(count: int) -> tuple[float, float, int]:
    nodes = f"gpu[00001-{count:05d}]"
    server = subprocess.Popen([sys.executable, "-c", SERVER, nodes, TOKEN],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        urls = json.loads(server.stdout.readline())
        started = time.perf_counter()
        summaries, failures = gather_agent(urls, GatherSettings(token=TOKEN))
        gathered = time.perf_counter() - started
        judge(summaries, failures, ClusterSettings(), via="agent")
        judged = time.perf_counter() - started
        if failures or len(summaries) != count:
            fail(f"gathered {len(summaries)} of {count} reports, {len(failures)} failures")
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(120)
    return gathered, judged, len(failures)


def main() -> None:
    print(module_note(), file=sys.stderr)
    sizes = [100, 1000] if "--quick" in sys.argv else [100, 1000, 10_000]
    figures: list[Figure] = []
    times: dict[int, float] = {}
    for count in sizes:
        gathered, judged, failed = gather(count)
        times[count] = gathered
        figures += [
            Figure(f"gather {count:,} agents over HTTP", round(gathered, 2), "s",
                   "<= 10 s" if count == 1000 else ""),
            Figure(f"gather {count:,} + cluster checks", round(judged, 2), "s"),
            Figure(f"gather {count:,}: nodes without a report", failed, "nodes", "0"),
        ]
    emit(figures + growth("gather", times))


if __name__ == "__main__":
    main()
