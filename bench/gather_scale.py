"""Gathering node reports over HTTP from many simulated agents on loopback: the wall time
of ``gather_agent`` (default concurrency 256, bearer token, real aiohttp client) at 100,
1,000 and 10,000 agents, and how it grows. Goal at 1,000: <= 10 s.

    .venv/bin/python bench/gather_scale.py [--quick] [--json]
    .venv/bin/python bench/gather_scale.py --deadline [--json]

``--deadline`` gathers 100,000 nodes whose agents never answer (one loopback listener that
never accepts: the kernel completes a backlog's worth of connections, the rest time out
connecting) under a 40 s deadline, in a process of its own: its wall time as a ratio to
the deadline (goal 1 +- 10 %) and its peak memory (goal <= 512 MB). Every node must end
as not reached.

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
DEADLINE_NODES = 100_000
DEADLINE_S = 40.0
SILENT = """
import json, resource, socket, sys, time
from clusterdiag.reports.fleet.gather import GatherSettings, gather_agent
count, deadline = int(sys.argv[1]), float(sys.argv[2])
with socket.socket() as listener:
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    urls = {f"gpu{i:06d}": url for i in range(count)}
    started = time.perf_counter()
    summaries, failures = gather_agent(urls, GatherSettings(deadline_s=deadline))
    took = time.perf_counter() - started
print(json.dumps({"took": took, "summaries": len(summaries), "failures": len(failures),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
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


def deadline_figures() -> list[Figure]:
    proc = subprocess.run([sys.executable, "-c", SILENT, str(DEADLINE_NODES), str(DEADLINE_S)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        fail(f"the gather failed: {proc.stderr.strip()[-500:]}")
    got = json.loads(proc.stdout)
    if got["summaries"] or got["failures"] != DEADLINE_NODES:
        fail(f"{got['summaries']} reports and {got['failures']} nodes not reached of "
             f"{DEADLINE_NODES}")
    return [
        Figure(f"gather {DEADLINE_NODES:,} silent agents, deadline {DEADLINE_S:g} s",
               round(got["took"], 2), "s", "1 +- 10 %", "the deadline",
               round(got["took"] / DEADLINE_S, 3)),
        Figure(f"gather {DEADLINE_NODES:,} silent agents: peak memory",
               round(got["peak_mb"]), "MB", "<= 512 MB"),
    ]


def main() -> None:
    print(module_note(), file=sys.stderr)
    if "--deadline" in sys.argv:
        emit(deadline_figures())
        return
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
