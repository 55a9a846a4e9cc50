"""The agent's API under a connection flood from many addresses: 1,100 loopback addresses
(127.0.x.y) each hold one idle connection to a simulated dgx-h100 agent and open a new one
0.5 s after the agent closes theirs, while a probe from 127.0.0.1 asks ``/healthz`` on a
fresh connection every 0.5 s and counts the answers that came within 1 s. Plain HTTP and
TLS (the flood's connections finish their handshake, then idle). The anchor is the same
probe against the same agent before the flood starts.

    .venv/bin/python bench/agent_flood.py [--quick] [--json]

The flood runs in its own process, so the probe's timing is not the flooder's event loop.
Every process here needs a descriptor per connection: the bench raises its own open-file
limit to the hard limit (the agent inherits it) and says so when the hard limit is too
low. --quick probes for 6 s instead of 20 s.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import multiprocessing
import resource
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import Figure, emit, fail, module_note

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the load helpers in tests/
from tests.integration.http_load import rss_kib, self_signed_cert

ADDRESSES = 1100
RECONNECT_S = 0.5
PROBE_EVERY_S = 0.5
PROBE_TIMEOUT_S = 1.0
GOAL = 95.0
WARM_S = 4.0  # the flood is on before the first probe
# the flooder's descriptors, the agent's (one per connection, its FD_RESERVE and some), ours
NEEDED_NOFILE = 2 * ADDRESSES + 512


@dataclass
class Probes:
    latencies_s: list[float] = field(default_factory=list)
    missed: int = 0

    @property
    def asked(self) -> int:
        return len(self.latencies_s) + self.missed

    @property
    def answered_pct(self) -> float:
        return 100.0 * len(self.latencies_s) / self.asked if self.asked else 0.0

    @property
    def median_ms(self) -> float:
        return statistics.median(self.latencies_s) * 1000 if self.latencies_s else 0.0


def raise_nofile() -> int:
    """Our soft open-file limit raised to the hard one (the agent, our child, inherits it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < NEEDED_NOFILE:
        fail(f"the hard open-file limit is {hard}: this bench needs {NEEDED_NOFILE} "
             f"({ADDRESSES} flood connections in two processes); raise it (ulimit -Hn)")
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return int(hard)


def make_cert(where: Path) -> tuple[Path, Path]:
    made = self_signed_cert(where)
    if isinstance(made, str):
        fail(made)
    return made


def start_agent(state: Path, config: Path | None) -> tuple[subprocess.Popen[bytes], int]:
    argv = [sys.executable, "-m", "clusterdiag.agent", "agent", "--simulate", "dgx-h100",
            "--interval", "5", "--state-dir", str(state), "--listen", "127.0.0.1:0"]
    if config is not None:
        argv += ["--config", str(config)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (state / "report.json").exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            fail("agent did not start")
        time.sleep(0.05)
    listen = json.loads((state / "agent.json").read_text())["listen"]
    return proc, int(listen.rsplit(":", 1)[1])


def flood_address(index: int) -> str:
    """127.0.1.1 onwards: never 127.0.0.1, where the probe comes from."""
    return f"127.0.{1 + index // 250}.{1 + index % 250}"


async def _hold(index: int, port: int, tls: ssl.SSLContext | None, connects: list[int]) -> None:
    """One address: a connection that never asks anything, reopened after it is closed."""
    while True:
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, local_addr=(flood_address(index), 0), ssl=tls,
                server_hostname="127.0.0.1" if tls else None)
        except (OSError, ssl.SSLError, asyncio.TimeoutError):
            await asyncio.sleep(RECONNECT_S)
            continue
        connects[0] += 1
        try:
            while await reader.read(4096):
                pass
        except (OSError, ssl.SSLError):
            pass
        writer.close()
        await asyncio.sleep(RECONNECT_S)


def _flood(port: int, cafile: str | None, seconds: float, out: multiprocessing.Queue[int]
           ) -> None:
    tls = ssl.create_default_context(cafile=cafile) if cafile else None
    connects = [0]

    async def run() -> None:
        tasks = [asyncio.create_task(_hold(i, port, tls, connects)) for i in range(ADDRESSES)]
        await asyncio.sleep(seconds)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(run())
    out.put(connects[0])


def probe(port: int, tls: ssl.SSLContext | None, seconds: float) -> Probes:
    """GET /healthz on a fresh connection every PROBE_EVERY_S; an answer is a 200 within
    PROBE_TIMEOUT_S of starting to connect."""
    probes = Probes()
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        started = time.monotonic()
        conn: http.client.HTTPConnection = (
            http.client.HTTPSConnection("127.0.0.1", port, timeout=PROBE_TIMEOUT_S,
                                        context=tls) if tls else
            http.client.HTTPConnection("127.0.0.1", port, timeout=PROBE_TIMEOUT_S))
        try:
            conn.request("GET", "/healthz")
            ok = conn.getresponse().status == 200
        except (OSError, http.client.HTTPException):
            ok = False
        finally:
            conn.close()
        took = time.monotonic() - started
        if ok and took <= PROBE_TIMEOUT_S:
            probes.latencies_s.append(took)
        else:
            probes.missed += 1
        time.sleep(max(0.0, PROBE_EVERY_S - took))
    return probes


def run_mode(tmp: Path, tls: bool, seconds: float) -> tuple[Probes, Probes, int, float]:
    """Unflooded probes, flooded probes, the flood's connections made, the agent's RSS
    peak (MiB) while flooded."""
    config = cafile = None
    if tls:
        crt, key = make_cert(tmp)
        config = tmp / "agent.yaml"
        config.write_text(json.dumps({"agent": {"tls_cert": str(crt), "tls_key": str(key)}}))
        cafile = str(crt)
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    proc, port = start_agent(tmp / "state", config)
    try:
        quiet = probe(port, context, 3.0)
        results: multiprocessing.Queue[int] = multiprocessing.Queue()
        flooder = multiprocessing.get_context("fork").Process(
            target=_flood, args=(port, cafile, WARM_S + seconds + 1.0, results))
        flooder.start()
        time.sleep(WARM_S)
        flooded = probe(port, context, seconds)
        rss_mib = rss_kib(proc.pid) / 1024
        connects = results.get(timeout=60)
        flooder.join(30)
        if proc.poll() is not None:
            fail(f"the agent exited {proc.returncode} under the flood")
    finally:
        proc.terminate()
        proc.wait(30)
    if not quiet.latencies_s:
        fail("the agent answered no probe before the flood")
    if connects < ADDRESSES:
        fail(f"the flood made only {connects} connections")
    return quiet, flooded, connects, rss_mib


def main() -> None:
    print(module_note(), file=sys.stderr)
    seconds = 6.0 if "--quick" in sys.argv[1:] else 20.0
    limit = raise_nofile()
    figures = []
    for tls in (False, True):
        mode = "TLS" if tls else "plain"
        with tempfile.TemporaryDirectory() as tmp:
            quiet, flooded, connects, rss = run_mode(Path(tmp), tls, seconds)
        load = f"{ADDRESSES:,} addresses x 1 idle connection, {mode}"
        figures += [
            Figure(f"/healthz answered within 1 s ({load}; {flooded.asked} probes)",
                   round(flooded.answered_pct, 1), "%", f">= {GOAL:g} %",
                   "the same probe unflooded",
                   round(flooded.answered_pct / quiet.answered_pct, 2)),
            Figure(f"/healthz median answer ({load})", round(flooded.median_ms, 1), "ms", "",
                   "the same probe unflooded",
                   round(flooded.median_ms / quiet.median_ms, 1) if flooded.latencies_s
                   else None),
            Figure(f"flood connections made ({load})", connects, "connections"),
            Figure(f"agent RSS under the flood ({load})", round(rss, 1), "MiB"),
        ]
    figures.append(Figure("open-file limit (bench and agent)", limit, "descriptors"))
    emit(figures)


if __name__ == "__main__":
    main()
