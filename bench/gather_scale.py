"""Gathering node reports over HTTP from many simulated agents on loopback, against the
least any gather can cost: the wall time of ``gather_agent`` (default concurrency 256,
bearer token, real aiohttp client) at 100, 1,000 and 10,000 agents, beside bare aiohttp
GETs of the same reports at the same concurrency with the same token and a ``json.loads``
of each body (the anchor), and how the time grows. Goal at 1,000 and 10,000: <= 1.3x the
anchor.

    .venv/bin/python bench/gather_scale.py [--quick] [--json]
    .venv/bin/python bench/gather_scale.py --deadline [--json]

``--deadline`` gathers 100,000 nodes whose agents never answer (one loopback listener that
never accepts: the kernel completes a backlog's worth of connections, the rest time out
connecting) under a 40 s deadline, in a process of its own: its wall time as a ratio to
the deadline (goal 1 +- 10 %) and its peak memory (goal <= 512 MB). Every node must end
as not reached.

The agents are Fleets (agent/cluster/fleet.py) in SERVERS other processes, each serving a
slice of the nodes, every node on its own 127.0.x.y address at its process's port: one
process serving 10,000 nodes answered slower than one gatherer asks (the figure was the
server's), and in other processes the gatherer's CPU is not shared with theirs. Each node
answers a real DGX H100 report (~60 KB of JSON). The gatherer runs in a process of a plain
(non-editable) install: the anchor and the gather alternate there (PAIRS), each over every
node, and the ratio is the median of the pairs' ratios, so load on the machine colours
both sides of each.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import Figure, emit, fail, growth, install_note, module_note, plain_install

TOKEN = "bench-token"
PAIRS = 3
# Server processes: the gatherer's one process asks, several answer, so on a small or
# busy machine the figure is the gatherer's, not a server's that falls behind.
SERVERS = 4
ANCHOR = "bare aiohttp GETs + json.loads, same concurrency and token"
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
# The gatherer: PAIRS times the anchor then the gather, each over every node; then the
# cluster checks on the last gather's summaries, timed alone. The anchor asks as a plain aiohttp
# client would, the pool's way (``concurrency`` workers over one list of nodes; one
# connection per node, as each node is asked once).
GATHER = """
import asyncio, json, sys, time
import aiohttp
from clusterdiag.reports.cluster_checks import ClusterSettings, judge
from clusterdiag.reports.fleet.gather import GatherSettings, gather_agent
with open(sys.argv[1]) as handle:
    urls = json.load(handle)
settings, pairs = GatherSettings(token=sys.argv[2]), int(sys.argv[3])

async def bare():
    headers = {"Authorization": f"Bearer {settings.token}"}
    connector = aiohttp.TCPConnector(limit=settings.concurrency, limit_per_host=0,
                                     force_close=True)
    todo, parsed = iter(urls.values()), [0]
    async with aiohttp.ClientSession(connector=connector) as session:
        async def worker():
            for url in todo:
                async with session.get(f"{url.rstrip('/')}/v1/report", headers=headers) as resp:
                    parsed[0] += isinstance(json.loads(await resp.read()), dict)
        await asyncio.gather(*(worker() for _ in range(min(settings.concurrency, len(urls)))))
    return parsed[0]

out = {"bare": [], "gather": []}
for _ in range(pairs):
    started = time.perf_counter()
    out["parsed"] = asyncio.run(bare())
    out["bare"].append(time.perf_counter() - started)
    started = time.perf_counter()
    summaries, failures = gather_agent(urls, settings)
    out["gather"].append(time.perf_counter() - started)
started = time.perf_counter()
judge(summaries, failures, ClusterSettings(), via="agent")
out["judged"] = time.perf_counter() - started
out["summaries"], out["failures"] = len(summaries), len(failures)
print(json.dumps(out))
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


def _slices(count: int) -> list[str]:
    """The node names gpu00001..``count`` as SERVERS contiguous node sets."""
    size = -(-count // SERVERS)
    return [f"gpu[{first:05d}-{min(first + size - 1, count):05d}]"
            for first in range(1, count + 1, size)]


def gather(python: str, work: Path, count: int) -> dict[str, Any]:
    """The gatherer's figures (GATHER) against ``count`` agents served by SERVERS
    processes running SERVER, each for a slice of the nodes on a port of its own."""
    servers = [subprocess.Popen([python, "-c", SERVER, nodes, TOKEN], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
               for nodes in _slices(count)]
    try:
        every: dict[str, str] = {}
        for server in servers:
            assert server.stdout is not None
            every.update(json.loads(server.stdout.readline() or "{}"))
        if len(every) != count:
            fail(f"the servers answer for {len(every)} of {count} nodes")
        urls = work / f"urls-{count}.json"
        urls.write_text(json.dumps(every))
        proc = subprocess.run([python, "-c", GATHER, str(urls), TOKEN, str(PAIRS)],
                              capture_output=True, text=True, check=False)
    finally:
        for server in servers:
            if server.stdin is not None:
                server.stdin.close()
        for server in servers:
            server.wait(120)
    if proc.returncode != 0:
        fail(f"the gather failed: {proc.stderr.strip()[-500:]}")
    got: dict[str, Any] = json.loads(proc.stdout)
    if got["failures"] or got["summaries"] != count or got["parsed"] != count:
        fail(f"gathered {got['summaries']} of {count} reports, {got['failures']} failures; "
             f"the anchor parsed {got['parsed']}")
    return got


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
    if "--deadline" in sys.argv:
        print(module_note(), file=sys.stderr)
        emit(deadline_figures())
        return
    sizes = [100, 1000] if "--quick" in sys.argv else [100, 1000, 10_000]
    figures: list[Figure] = []
    times: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="clusterdiag-gather-") as work, \
            plain_install(Path(work) / "install") as install:
        print(install_note(install), file=sys.stderr)
        for count in sizes:
            got = gather(install.python, Path(work), count)
            times[count] = statistics.median(got["gather"])
            ratio = statistics.median(g / b for g, b in zip(got["gather"], got["bare"],
                                                            strict=True))
            figures += [
                Figure(f"gather {count:,} agents over HTTP", round(times[count], 2), "s",
                       "<= 1.3x" if count >= 1000 else "", ANCHOR, round(ratio, 2)),
                Figure(f"gather {count:,}: {ANCHOR}", round(statistics.median(got["bare"]), 2),
                       "s"),
                Figure(f"gather {count:,}: the cluster checks after it", round(got["judged"], 2),
                       "s"),
            ]
    emit(figures + growth("gather", times))


if __name__ == "__main__":
    main()
