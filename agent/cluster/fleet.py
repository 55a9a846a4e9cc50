"""Simulated agents for a whole cluster in one process, for the demo and gather benchmarks.

Every node of a ClusterSpec gets its own loopback address (127.0.0.2, 127.0.0.3, ...
127.0.0.254, then 127.0.1.1, ...) on one shared port and answers the agent's real HTTP
API (server.py: same routes, limits and bearer-token rule) with a report made by the
real pipeline (``run_node``) on its simulated hardware.

To keep a thousand nodes affordable the pipeline runs once per distinct (profile, rack,
clique, faults) — nodes that differ only in name have the same simulated hardware — and
each node gets a copy with its own name and its own GPU UUIDs (derived from the name, as
the simulator does) stamped in. A spec whose faults include a rate fault (a FaultKind at
level ``full``) is judged at ``full``, two samples a second apart, as a running agent with
history would; the others at ``quick``. The reports do not change after ``start``: a
refresh is a no-op and there is nothing to clear.

``SimNode.serve`` (set by faults) says how a node answers: ``ok``; ``unreachable`` —
nothing listens at its address; ``garbage`` — 200 with a body that is not JSON.
"""

from __future__ import annotations

import asyncio
import json
import resource
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from ...checks.core.levels import Level, Mode
from ...reports.model.node import NodeReport
from ..daemon import cycle
from ..daemon.metrics import AgentView, registry_for
from ..daemon.server import Served, make_app, serve
from ..health import store as health_store
from ..health.lifecycle import Health
from ..run.runner import RunOptions, evaluate
from ..settings.config import Config
from ..sim.faults.catalog import FAULTS
from ..sim.node import build, env_for
from ..sim.spec import ClusterSpec, NodeSpec

GARBAGE = b"<html><body>502 Bad Gateway</body></html>\n"
FULL_INTERVAL_S = 1.0
_START_TIMEOUT_S = 600.0


def address(index: int) -> str:
    """The ``index``-th node's loopback address: 127.0.0.2 up, skipping .0 and .255."""
    n = index + 1
    return f"127.0.{n // 254}.{n % 254 + 1}"


@dataclass
class _Node:
    """One simulated agent's fixed answers; the snapshot (shared by every node of the
    same hardware) is encoded with this node's name only when asked for."""
    report: dict[str, Any]
    snapshot: dict[str, Any]
    garbage: bool

    def __post_init__(self) -> None:
        self._body = GARBAGE if self.garbage else json.dumps(self.report).encode()

    def report_body(self) -> bytes | None:
        return self._body

    def snapshot_body(self) -> bytes | None:
        return GARBAGE if self.garbage else json.dumps(
            dict(self.snapshot, node=self.report["node"])).encode()

    def health_body(self) -> bytes:
        return health_store.body(Health())  # a simulated node is never drained

    def metrics_body(self) -> bytes:
        view = AgentView(report=NodeReport.from_dict(self.report), collections=1)
        return registry_for(lambda: view).text()

    async def refresh(self) -> None:
        return None

    async def clear(self, event_id: str) -> list[str]:
        return []


def _key(spec: NodeSpec) -> str:
    faults = [{k: v for k, v in f.items() if k != "node"} for f in spec.faults]
    return json.dumps([spec.profile, spec.rack, spec.clique, faults], sort_keys=True)


class Fleet:
    """Simulated agents for every node of a ClusterSpec (agent/sim/spec.py), each on its
    own loopback address (127.0.0.2, 127.0.0.3, ... then 127.0.1.x ...), one port."""

    def __init__(self, spec: ClusterSpec, *, token: str | None = None, port: int = 0,
                 config: Config | None = None) -> None:
        self.spec, self.token, self.port = spec, token, port
        self.config = config or Config()
        self._nodes: dict[str, _Node] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: Served | None = None
        self.urls: dict[str, str] = {}

    def __enter__(self) -> Fleet:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _reports(self) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
        """(report, snapshot) per distinct hardware key, from the real pipeline."""
        done: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        for node in self.spec.nodes.values():
            key = _key(node)
            if key in done:
                continue
            full = any(FAULTS[str(f["kind"])].level is Level.FULL for f in node.faults)
            env = env_for(node)
            options = RunOptions(level=Level.FULL if full else Level.QUICK, mode=Mode.AGENT,
                                 budget_s=float(self.config.data["budget_s"]),
                                 profile=str(self.config.data["profile"]))
            started = time.time()
            previous = cycle.collect(env, self.config, options) if full else None
            if full:
                time.sleep(FULL_INTERVAL_S)
            snap = cycle.collect(env, self.config, options)
            report = evaluate(snap, self.config, options, previous=previous, started=started)
            done[key] = (report.to_dict(), snap.to_dict())
        return done

    def _build(self) -> list[tuple[str, str]]:
        """Each node's answers; the (name, address) pairs that listen."""
        reports = self._reports()
        listening = []
        for index, (name, spec) in enumerate(self.spec.nodes.items()):
            sim = build(spec)
            base, snap = reports[_key(spec)]
            report = dict(base, node=name)
            inventory = dict(report.get("inventory") or {})
            uuids = {g.index: g.uuid for g in sim.gpus}
            inventory["gpus"] = [dict(g, uuid=uuids.get(g.get("index"), g.get("uuid")))
                                 for g in inventory.get("gpus") or []]
            report["inventory"] = inventory
            self._nodes[address(index)] = _Node(report, snap, garbage=sim.serve == "garbage")
            if sim.serve != "unreachable":
                listening.append((name, address(index)))
        return listening

    def start(self) -> dict[str, str]:
        """Serve every node; node name -> "http://127.0.0.N:PORT" for every node (nothing
        answers at an unreachable node's). Blocks until each node's report exists."""
        if self._thread is not None:
            return dict(self.urls)
        listening = self._build()
        _raise_fd_limit(len(listening) * 2 + 256)
        ready: Future[int] = Future()
        loop = asyncio.new_event_loop()
        self._loop = loop
        hosts = [addr for _, addr in listening]

        async def begin() -> None:
            app = make_app(lambda request: self._nodes.get(_local_host(request)),
                           lambda: self.token)
            self._runner, port = await serve(app, hosts, self.port)
            ready.set_result(port)

        def main() -> None:
            asyncio.set_event_loop(loop)
            loop.create_task(begin()).add_done_callback(failed)
            loop.run_forever()

        def failed(task: asyncio.Task[None]) -> None:
            error = task.exception()
            if error is not None and not ready.done():
                ready.set_exception(error)

        self._thread = threading.Thread(target=main, name="fleet", daemon=True)
        self._thread.start()
        try:
            port = ready.result(_START_TIMEOUT_S)
        except BaseException:
            self.close()
            raise
        self.port = port
        self.urls = {name: f"http://{address(i)}:{port}"
                     for i, name in enumerate(self.spec.nodes)}
        return dict(self.urls)

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = self._thread = None

        async def end() -> None:
            if self._runner is not None:
                await self._runner.cleanup()
                self._runner = None

        if loop.is_running():
            asyncio.run_coroutine_threadsafe(end(), loop).result(30)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def _local_host(request: web.Request) -> str:
    sock = request.transport.get_extra_info("sockname") if request.transport else None
    return str(sock[0]) if sock else ""


def _raise_fd_limit(wanted: int) -> None:
    """A listening socket per node plus the clients' connections: lift the soft limit
    toward the hard one when the default (often 1024) is too low."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
