"""Gathering node reports from many nodes: from their agents over HTTP, through ClusterShell
(ssh and its fan-out/gateway tree), or with srun inside a Slurm allocation.

Whatever the transport, every node asked ends as a summary or as a reason: a node that is
silent, answers garbage or another schema version becomes cluster.reachability, never a
crash and never a node that silently drops out of the report. A node the gather never
asked before its deadline is our own trouble, not the node's: an ``error`` (unjudged),
never a ``fail`` that would exclude it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import zlib
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
from ClusterShell.Defaults import _load_workerclass
from ClusterShell.Event import EventHandler
from ClusterShell.NodeSet import NodeSet
from ClusterShell.Task import task_self

from ...agent.base.errors import UsageError
from ...agent.base.hostname import same_host
from ...agent.base.tokenfile import read_token
from ...checks.core.finding import Status
from ..cluster_checks import Unreachable
from ..model.summary import BadReport, NodeSummary, summarize
from .pool import within_deadline
from .remote_output import Bounds, bounded_worker, read_srun

Advance = Callable[[], None]
Gathered = tuple[list[NodeSummary], list[Unreachable]]
# HTTP answers worth one more try: the agent or a proxy in front of it is busy or restarting.
TRANSIENT_HTTP = frozenset({502, 503, 504})
# A dgx-h100 node report is ~0.2 MB and an NVL72 tray's about as much; 16 MiB is far past
# any real one while 10,000 nodes of it still fit a gatherer's memory one wave at a time.
MAX_REPORT_BYTES = 16 << 20
# Name lookups run in threads (aiohttp's default resolver): enough for a wave of nodes
# whose names all time out not to queue behind each other (asyncio's default is 6 here).
RESOLVER_THREADS = 64
T = TypeVar("T")


@dataclass(frozen=True)
class GatherSettings:
    concurrency: int = 256
    connect_timeout_s: float = 3.0
    read_timeout_s: float = 15.0
    retries: int = 1
    token: str | None = None
    agent_url: str = "http://{node}:9464"
    remote_command: str = "clusterdiag run --format json"
    ssh_worker: str = "ssh"
    deadline_s: float = 120.0
    max_report_bytes: int = MAX_REPORT_BYTES


def settings_from(section: Mapping[str, Any], agent_token_file: str | None = None
                  ) -> GatherSettings:
    """From the config's ``cluster:`` section; the token file defaults to the agent's and
    is read exactly as the agent reads it, so a token the agent accepts is the one sent."""
    token = None
    token_file = section.get("token_file") or agent_token_file
    if token_file:
        setting = "cluster.token_file" if section.get("token_file") else "agent.token_file"
        token = read_token(str(token_file), setting)
    if int(section.get("concurrency", 256)) < 1:
        raise UsageError("cluster.concurrency must be at least 1")
    return GatherSettings(
        concurrency=int(section.get("concurrency", 256)),
        connect_timeout_s=float(section.get("connect_timeout_s", 3.0)),
        read_timeout_s=float(section.get("read_timeout_s", 15.0)),
        retries=max(0, int(section.get("retries", 1))), token=token,
        agent_url=str(section.get("agent_url", "http://{node}:9464")),
        remote_command=str(section.get("remote_command", "clusterdiag run --format json")),
        ssh_worker=str(section.get("ssh_worker", "ssh")),
        deadline_s=float(section.get("deadline_s", 120.0)))


def parse_answer(node: str, raw: bytes | str) -> NodeSummary | Unreachable:
    """One node's answer as a summary, or the reason it is not one."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than json reads
        return Unreachable("answer is not JSON", node=node)
    try:
        summary = summarize(data)
    except BadReport as exc:
        return Unreachable(str(exc), node=node)
    if not same_host(node, summary.node):
        return Unreachable("answered with another node's report", node=node)
    summary.node = node
    return summary


def _finish(results: Sequence[NodeSummary | Unreachable]) -> Gathered:
    summaries = [r for r in results if isinstance(r, NodeSummary)]
    failures = [r for r in results if isinstance(r, Unreachable)]
    return summaries, failures


# -- agent: GET /v1/report from every node's daemon ------------------------------------------

def agent_urls(nodes: Sequence[str], template: str) -> dict[str, str]:
    return {node: template.format(node=node) for node in nodes}


class Refused(Exception):
    """An answer we stop reading: too large, in an encoding we did not ask for, a bomb."""


def attempt_s(settings: GatherSettings) -> float:
    """One request's whole time: name resolution, connect, the answer to its last byte."""
    return settings.connect_timeout_s + settings.read_timeout_s


def _error_reason(exc: BaseException, settings: GatherSettings) -> str:
    if isinstance(exc, Refused):
        return str(exc)
    if isinstance(exc, aiohttp.ClientConnectorError):
        # strerror here carries the address; the errno text groups across nodes.
        code = exc.os_error.errno if exc.os_error is not None else None
        return f"no answer (connect: {os.strerror(code).lower() if code else 'failed'})"
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return f"no answer within {settings.connect_timeout_s:g} s (connect)"
    if isinstance(exc, aiohttp.SocketTimeoutError):
        return f"no complete answer within {settings.read_timeout_s:g} s"
    if isinstance(exc, asyncio.TimeoutError):  # the whole request, resolution included
        return f"no complete answer within {attempt_s(settings):g} s"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "agent closed the connection"
    if isinstance(exc, aiohttp.InvalidURL):
        return "agent URL is not valid"
    return f"no answer ({type(exc).__name__})"


async def read_capped(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    """The body, at most ``limit`` bytes on the wire and ``limit`` once decompressed: the
    session does not decompress (a 1 MiB gzip bomb is 1 GiB inflated), this does, in
    pieces it can stop after."""
    encoding = resp.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity", "gzip", "x-gzip", "deflate"):
        raise Refused("agent answered in an encoding we did not ask for")
    if resp.content_length is not None and resp.content_length > limit:
        raise Refused(f"report larger than {limit} bytes")
    unpack = None if encoding in ("", "identity") else zlib.decompressobj(wbits=47)
    parts: list[bytes] = []
    wire = size = 0
    try:
        async for chunk in resp.content.iter_chunked(1 << 16):
            wire += len(chunk)
            if wire > limit:
                raise Refused(f"report larger than {limit} bytes")
            data = chunk if unpack is None else unpack.decompress(chunk, limit + 1 - size)
            size += len(data)
            if size > limit:
                raise Refused(f"report larger than {limit} bytes decompressed")
            parts.append(data)
        if unpack is not None:
            parts.append(unpack.flush())
    except zlib.error:
        raise Refused(f"answer is not valid {encoding}") from None
    return b"".join(parts)


async def _fetch(session: aiohttp.ClientSession, node: str, url: str,
                 settings: GatherSettings) -> NodeSummary | Unreachable:
    headers = {"Authorization": f"Bearer {settings.token}"} if settings.token else {}
    headers["Accept-Encoding"] = "gzip, deflate"
    result: NodeSummary | Unreachable = Unreachable("no answer", node=node)
    for attempt in range(settings.retries + 1):
        if attempt:
            await asyncio.sleep(0.2 * attempt)
        try:
            # Redirects are not followed: the token would go wherever an agent points.
            async with session.get(f"{url.rstrip('/')}/v1/report", headers=headers,
                                   allow_redirects=False) as resp:
                if 300 <= resp.status < 400:
                    return Unreachable(f"agent answered with a redirect (HTTP {resp.status}), "
                                       "not followed", node=node)
                body = await read_capped(resp, settings.max_report_bytes)
                if resp.status == 200:
                    return parse_answer(node, body)
                reason = ("agent refused our token" if resp.status in (401, 403)
                          else "agent answered")
                result = Unreachable(f"{reason} (HTTP {resp.status})", node=node)
                if resp.status not in TRANSIENT_HTTP:
                    return result
        except Refused as exc:
            return Unreachable(str(exc), node=node)
        except (asyncio.TimeoutError, aiohttp.ClientError, ValueError) as exc:
            result = Unreachable(_error_reason(exc, settings), node=node)
            if isinstance(exc, aiohttp.InvalidURL):
                return result
    return result


async def _gather_agents(urls: Mapping[str, str], settings: GatherSettings,
                         advance: Advance | None) -> list[NodeSummary | Unreachable]:
    timeout = aiohttp.ClientTimeout(total=attempt_s(settings),
                                    sock_connect=settings.connect_timeout_s,
                                    sock_read=settings.read_timeout_s)
    # Concurrency is bounded by the pool's workers, not by the connector's limit: aiohttp
    # wakes connector waiters by scanning every waiting host, and with one host per node
    # that is quadratic in the nodes.
    connector = aiohttp.TCPConnector(limit=settings.concurrency, limit_per_host=0,
                                     force_close=True, ttl_dns_cache=300)
    nodes = list(urls)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector,
                                     raise_for_status=False, auto_decompress=False,
                                     trust_env=False) as session:
        async def one(index: int) -> NodeSummary | Unreachable:
            result = await _fetch(session, nodes[index], urls[nodes[index]], settings)
            if advance is not None:
                advance()
            return result

        pooled = await within_deadline(len(nodes), one, settings.concurrency,
                                       settings.deadline_s)
    return [result if result is not None else _unasked(nodes[index], index in pooled.late,
                                                       settings.deadline_s)
            for index, result in enumerate(pooled.results)]


def _unasked(node: str, late: bool, deadline_s: float) -> Unreachable:
    """A node with no result at the gather's deadline: asked and silent (a fail, as any
    node that does not answer), or never asked (an error: the deadline is ours)."""
    if late:
        return Unreachable(f"no answer within the gather's deadline ({deadline_s:g} s)",
                           node=node)
    return Unreachable(f"not asked: clusterdiag's own gather deadline ({deadline_s:g} s); "
                       "raise cluster.deadline_s or cluster.concurrency", node=node,
                       status=Status.ERROR)


def _run_bounded(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` without its wait for the resolver threads: a getaddrinfo that hangs
    (a DNS server that does not answer) is given up at the request's deadline, and the
    run must not then wait for it anyway on the way out."""
    loop = asyncio.new_event_loop()
    resolver = ThreadPoolExecutor(RESOLVER_THREADS, thread_name_prefix="resolve")
    loop.set_default_executor(resolver)
    try:
        return loop.run_until_complete(coro)
    finally:
        resolver.shutdown(wait=False, cancel_futures=True)
        loop.close()


def gather_agent(urls: Mapping[str, str], settings: GatherSettings,
                 advance: Advance | None = None) -> Gathered:
    """Every node's latest report from its agent (node -> base URL), within the gather's
    deadline, each answer within its own time and size."""
    return _finish(_run_bounded(_gather_agents(urls, settings, advance)))


# -- ssh: ClusterShell runs the command on every node ----------------------------------------

def gather_ssh(nodes: Sequence[str], settings: GatherSettings,
               advance: Advance | None = None) -> Gathered:
    """``remote_command`` on every node through ClusterShell: its fan-out, timeouts and
    gateway tree (topology.conf) apply; ``ssh_worker: exec`` runs it locally per node
    (``%h`` is the node name), as ClusterShell's own tests do. Each node's output is
    capped and the whole gather ends at its deadline (remote_output.py)."""
    bounds = Bounds(settings.max_report_bytes, settings.deadline_s)

    class Progress(EventHandler):  # type: ignore[misc]
        def ev_hup(self, worker: Any, node: str, rc: int) -> None:
            bounds.exited[str(node)] = rc
            if advance is not None:
                advance()

    class Deadline(EventHandler):  # type: ignore[misc]
        def ev_timer(self, timer: Any) -> None:
            over = {str(n) for n in worker.iter_keys_timeout()}  # their own timeout said
            for node in nodes:
                if node not in bounds.exited and node not in over:
                    bounds.cut.setdefault(node, bounds.missed())
            worker.abort()

    task = task_self()
    task.set_info("fanout", settings.concurrency)
    task.set_info("connect_timeout", settings.connect_timeout_s)
    try:
        base = (task.default("distant_worker") if settings.ssh_worker == "ssh"
                else _load_workerclass(settings.ssh_worker))
    except (ImportError, AttributeError):
        raise UsageError(f"cluster.ssh_worker {settings.ssh_worker!r}: no such "
                         "ClusterShell worker") from None
    bounded = bounded_worker(base, bounds)
    if bounded is None:
        raise UsageError(f"cluster.ssh_worker {settings.ssh_worker!r}: not one of "
                         "ClusterShell's exec-based workers (ssh, rsh, exec), whose output "
                         "clusterdiag can bound")
    task.set_default("distant_worker", bounded)
    try:
        worker = task.shell(settings.remote_command, nodes=NodeSet.fromlist(nodes),
                            handler=Progress(), timeout=settings.read_timeout_s, stderr=True)
        task.timer(settings.deadline_s, handler=Deadline(), autoclose=True)
        task.run()
    finally:
        task.set_default("distant_worker", base)
    timed_out = {str(n) for n in worker.iter_keys_timeout()}
    results: list[NodeSummary | Unreachable] = []
    for node in nodes:
        if node in bounds.cut:
            results.append(Unreachable(bounds.cut[node], node=node))
            continue
        if node in timed_out:
            results.append(Unreachable(f"no complete answer within "
                                       f"{settings.read_timeout_s:g} s", node=node))
            continue
        out = bytes(bounds.out.get(node, b""))
        if not out.strip():
            err = bounds.err.get(node, b"").decode(errors="replace").strip()
            rc = bounds.exited.get(node)
            tail = err.splitlines()[-1][:120] if err else f"exit code {rc}"
            results.append(Unreachable(f"remote command gave no report ({_stable(tail)})",
                                       node=node))
            continue
        results.append(parse_answer(node, out))
    return _finish(results)


def _stable(text: str) -> str:
    """Error text without the node name ssh puts in it, so it groups across nodes."""
    return text.split(": ", 1)[1] if text.startswith(("ssh:", "rsh:")) and ": " in text \
        else text


# -- srun: one task per node inside a Slurm allocation ---------------------------------------

def srun_argv(nodes: Sequence[str], command: str) -> list[str]:
    """Each task first prints its node name, so ``--label``'s task ranks map to nodes
    whatever order Slurm placed the tasks in."""
    script = f'printf "%s\\n" "${{SLURMD_NODENAME:-$(hostname -s)}}"; exec {command}'
    return ["srun", f"--nodelist={NodeSet.fromlist(nodes)}", f"--nodes={len(nodes)}",
            f"--ntasks={len(nodes)}", "--ntasks-per-node=1", "--label", "--kill-on-bad-exit=0",
            "sh", "-c", script]


def gather_srun(nodes: Sequence[str], settings: GatherSettings) -> Gathered:
    """``remote_command`` as one srun task per node, each node's output capped, srun
    stopped (its whole process group) at the gather's deadline (remote_output.py)."""
    if shutil.which("srun") is None:
        raise UsageError("--via srun: srun not found (run inside a Slurm allocation)")
    bounds = Bounds(settings.max_report_bytes, settings.deadline_s)
    timeout = min(settings.deadline_s,
                  settings.connect_timeout_s + settings.read_timeout_s + 30)
    outputs, why, stopped = read_srun(srun_argv(nodes, settings.remote_command), nodes,
                                      bounds, timeout)
    results: list[NodeSummary | Unreachable] = []
    for node in nodes:
        if node in bounds.cut:
            results.append(Unreachable(bounds.cut[node], node=node))
        elif outputs.get(node, b"").strip():
            answer = parse_answer(node, outputs[node])  # complete before srun was stopped?
            results.append(answer if stopped is None or isinstance(answer, NodeSummary)
                           else Unreachable(f"no complete report from its srun task "
                                            f"({stopped})", node=node))
        else:
            results.append(Unreachable(f"no report from its srun task "
                                       f"({(stopped or why)[:120]})", node=node))
    return _finish(results)
