"""``run --nodes --via agent`` against hostile agents: a loopback server started
here answers as one healthy node and as agents that drip a byte a second, send 3 GiB,
send a 1 MiB gzip bomb or redirect elsewhere. The gather must end within its limits, in
bounded memory, with each hostile node named as unreachable and the healthy one judged."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.conftest import run_cli

HUGE = 3 << 30
BOMB_DECOMPRESSED = 1 << 30
RSS_BOUND_KIB = 400 * 1024  # the gatherer's peak: a healthy gather of a few nodes is ~80 MB
SLACK_S = 15.0  # interpreter start and a loaded 2-core machine


def _bomb() -> bytes:
    """gzip of 1 GiB of spaces (JSON whitespace): about 1 MiB on the wire."""
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)
    chunk = b" " * (1 << 20)
    parts = [packer.compress(chunk) for _ in range(BOMB_DECOMPRESSED // len(chunk))]
    return b"".join([*parts, packer.flush()])


class Hostile(threading.Thread):
    """One aiohttp server on 127.0.0.1; the first path segment picks the behaviour."""

    def __init__(self, good: bytes, bomb: bytes) -> None:
        super().__init__(daemon=True)
        self.good, self.bomb = good, bomb
        self.port = 0
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        node = request.match_info["node"]
        kind = node.rstrip("0123456789")
        if kind == "good":
            body = json.loads(self.good)
            body["node"] = node
            return web.Response(body=json.dumps(body).encode(), content_type="application/json")
        if kind == "redirect":
            raise web.HTTPFound(f"http://127.0.0.1:{self.port}/good1/v1/report")
        if kind == "bomb":
            return web.Response(body=self.bomb, headers={"Content-Encoding": "gzip",
                                                         "Content-Type": "application/json"})
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        if kind == "huge":
            response.content_length = HUGE
        await response.prepare(request)
        try:
            if kind == "huge":
                chunk = b" " * (1 << 20)
                for _ in range(HUGE // len(chunk)):
                    await response.write(chunk)
            else:  # drip: a byte a second, for longer than any test waits
                for _ in range(600):
                    await response.write(b" ")
                    await asyncio.sleep(1.0)
        except (ConnectionError, RuntimeError):
            pass
        return response

    def run(self) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_get("/{node}/v1/report", self.handle)
        runner = web.AppRunner(app, access_log=None)
        self.loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = site.port
        self.ready.set()
        self.loop.run_forever()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.join(10)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    out = tmp_path_factory.mktemp("good") / "good.json"
    proc = run_cli("run", "--simulate", "dgx-h100", "--format", "json", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    server = Hostile(out.read_bytes(), _bomb())
    server.start()
    assert server.ready.wait(30)
    yield server
    server.stop()


def _gather(tmp_path: Path, server: Hostile, nodes: str, **cluster: Any
            ) -> tuple[subprocess.CompletedProcess[str], float, int]:
    """The real command in a child of a small wrapper that reports the child's peak RSS;
    the child may use at most 4 GiB of address space (the shared machine's memory)."""
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"cluster": {
        "agent_url": f"http://127.0.0.1:{server.port}/{{node}}", **cluster}}))
    wrapper = ("import resource, subprocess, sys\n"
               "def cap():\n"
               "    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
               "p = subprocess.run(sys.argv[1:], preexec_fn=cap, capture_output=True, text=True)\n"
               "sys.stdout.write(p.stdout)\n"
               "sys.stderr.write(p.stderr)\n"
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
               "sys.exit(p.returncode)\n")
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", wrapper, sys.executable, "-m", "clusterdiag.agent", "run",
         "--nodes", nodes, "--via", "agent", "--format", "json", "--config", str(config)],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "NO_PROXY": "*"})
    took = time.monotonic() - started
    *lines, rss = proc.stderr.rstrip("\n").split("\n")
    proc.stderr = "\n".join(lines)
    return proc, took, int(rss)


def _unreachable(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """Node -> why it is unreachable, from the cluster.reachability findings (one per
    reason, with the nodes it holds for as a folded node set)."""
    from clusterdiag.agent.model.nodeset import expand

    data = json.loads(proc.stdout)
    return {node: f["message"] for f in data["cluster_findings"]
            if f["check"] == "cluster.reachability" and f["status"] == "fail"
            for node in expand(f["nodes"])}


def test_hostile_agents_are_cut_off_within_their_limits(hostile: Hostile, tmp_path: Path
                                                        ) -> None:
    # the good node's answer shares this process's event loop with the hostile ones, the
    # huge stream among them: 8 s to read it, still far below a drip's minutes
    proc, took, rss = _gather(tmp_path, hostile, "good1,drip1,huge1,bomb1,redirect1",
                              connect_timeout_s=2, read_timeout_s=8, retries=0)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 1, proc.stderr
    print(f"\ngather of 5 hostile nodes: {took:.1f} s, peak RSS {rss / 1024:.0f} MiB")
    assert took < 2 + 8 + SLACK_S, took
    assert rss < RSS_BOUND_KIB, rss
    reasons = _unreachable(proc)
    assert set(reasons) == {"drip1", "huge1", "bomb1", "redirect1"}, reasons
    assert "within 10 s" in reasons["drip1"], reasons
    assert "larger than" in reasons["huge1"], reasons
    assert "larger than" in reasons["bomb1"], reasons
    assert "decompressed" in reasons["bomb1"], reasons
    assert "redirect" in reasons["redirect1"], reasons
    assert "not followed" in reasons["redirect1"], reasons
    nodes = {n["node"]: n for n in json.loads(proc.stdout)["nodes"]}
    assert nodes["good1"]["verdict"] == "pass", nodes["good1"]


def test_the_whole_gather_ends_at_its_deadline(hostile: Hostile, tmp_path: Path) -> None:
    proc, took, _ = _gather(tmp_path, hostile, "good1,drip[1-3]", connect_timeout_s=2,
                            read_timeout_s=60, retries=3, deadline_s=8)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert took < 8 + SLACK_S, took
    reasons = _unreachable(proc)
    assert set(reasons) == {"drip1", "drip2", "drip3"}, reasons
    assert all("deadline" in r for r in reasons.values()), reasons
