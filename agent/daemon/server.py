"""The agent's HTTP API on aiohttp, shared by the daemon and the simulated Fleet.

Routes (docs/design.md §6): ``GET /healthz``, ``GET /v1/report`` (``?refresh=1`` collects now,
rate-limited), ``GET /v1/snapshot``, ``GET /v1/health`` (the node's lifecycle,
docs/return-to-service.md), ``GET /metrics``, ``POST /v1/clear/{id}``. Everything
but the clear is read-only and served from memory: no request shells out or touches a GPU
except a rate-limited refresh.

Limits, because the agent runs beside training jobs (prometheus.io/docs/operating/security): a
request line and each header at most 4 KiB, at most 32 headers, no body beyond 1 KiB, a
connection that has not finished its request within ``KEEPALIVE_S`` is closed (slow
senders), every handler has ``REQUEST_TIMEOUT_S``, and at most ``MAX_CONCURRENT`` requests
are served at once. A refresh waits for its collection outside those slots (at most
``MAX_REFRESHING`` clients at once, one refresh each), so refreshes never starve /healthz
or /metrics. Connections are admitted by gate.py (a cap in total and per client, the
longest-idle connection closed for a new one when full, a share kept for /healthz and
/metrics, a TLS handshake deadline). A token-protected route answers 401 with a body that
says nothing about why (no hint whether the token was missing, malformed or wrong);
/healthz, and the paths in ``agent.unauthenticated_paths`` (only /metrics may be added),
need no token.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from . import server_only  # noqa: F401  # isort: skip  (before aiohttp: no client)
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from .deadline import deadline
from .exposition import CONTENT_TYPE
from .gate import Gate
from .metrics import accepts_gzip, gzipped
from .security import token_matches
from .state import ID_RE

if TYPE_CHECKING:
    import ssl

KEEPALIVE_S = 5.0
REQUEST_TIMEOUT_S = 15.0
MAX_CONCURRENT = 16
MAX_REFRESHING = 4  # clients waiting for a refresh at once, one each
MAX_BODY = 1024
# lingering_time: how long a body nobody wants (a refused POST's) is read and dropped before
# the connection closes; aiohttp's 10 s would let a client that never sends the body it
# announced hold the connection twice as long as one that never finishes its headers.
HANDLER_LIMITS: dict[str, Any] = {"max_line_size": 4096, "max_field_size": 4096, "max_headers": 32,
                  "keepalive_timeout": KEEPALIVE_S, "lingering_time": 2.0}
# A burst of connections (a gather fanning out, hundreds of scrapers) beyond the accept
# queue waits for SYN retransmits (1 s, then 3 s); a deeper queue costs nothing when idle.
BACKLOG = 1024
JSON = "application/json"


class RateLimited(Exception):
    """A refresh asked for too soon; ``retry_after_s`` says when the next one may run."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"retry after {retry_after_s:.0f} s")
        self.retry_after_s = retry_after_s


class NodeApi(Protocol):
    """One node's answers; bodies are pre-encoded so a request costs no serialisation."""

    def report_body(self) -> bytes | None: ...
    def snapshot_body(self) -> bytes | None: ...
    def health_body(self) -> bytes: ...
    def metrics_body(self) -> bytes: ...
    async def refresh(self) -> None: ...
    async def clear(self, event_id: str) -> list[str]: ...


Resolve = Callable[[web.Request], NodeApi | None]
_API = web.AppKey("api", object)
_TOKEN = web.AppKey("token", object)
_SLOTS = web.AppKey("slots", asyncio.Semaphore)
_OPEN = web.AppKey("open_paths", frozenset[str])
_REFRESHING = web.AppKey("refreshing", set[str])

_UNAUTHORIZED = {"status": 401, "text": "unauthorized\n",
                 "headers": {"WWW-Authenticate": 'Bearer realm="clusterdiag"'}}


def _api(request: web.Request) -> NodeApi:
    resolve: Resolve = request.app[_API]  # type: ignore[assignment]
    api = resolve(request)
    if api is None:
        raise web.HTTPNotFound(text="no agent at this address\n")
    return api


def _token(request: web.Request) -> str | None:
    token: Callable[[], str | None] = request.app[_TOKEN]  # type: ignore[assignment]
    return token()


def wants_refresh(request: web.Request) -> bool:
    return request.path == "/v1/report" and request.query.get("refresh") in ("1", "true", "yes")


@web.middleware
async def _guard(request: web.Request,
                 handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                 ) -> web.StreamResponse:
    token = _token(request)
    open_paths = request.app[_OPEN]
    if token is not None and request.path not in open_paths \
            and not token_matches(request.headers.get("Authorization"), token):
        return web.Response(**_UNAUTHORIZED)  # type: ignore[arg-type]
    if wants_refresh(request):
        # A refresh waits for a collection (seconds): it must not hold one of the slots
        # /healthz and /metrics are answered in, and one client may wait for one at a time.
        refreshing = request.app[_REFRESHING]
        client = request.remote or "-"
        if client in refreshing or len(refreshing) >= MAX_REFRESHING:
            return web.Response(status=429, text="refresh already waiting\n",
                                headers={"Retry-After": "1"})
        refreshing.add(client)
        try:
            response = await _bounded(handler, request)
        finally:
            refreshing.discard(client)
    else:
        slots = request.app[_SLOTS]
        if slots.locked():
            return web.Response(status=503, text="busy\n", headers={"Retry-After": "1"})
        async with slots:
            response = await _bounded(handler, request)
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


async def _bounded(handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
                   request: web.Request) -> web.StreamResponse:
    try:
        async with deadline(REQUEST_TIMEOUT_S):
            return await handler(request)
    except asyncio.TimeoutError:  # not the builtin TimeoutError before Python 3.11
        return web.Response(status=503, text="timed out\n")


async def _healthz(request: web.Request) -> web.Response:
    api = _api(request)
    ready = api.report_body() is not None
    return web.Response(status=200 if ready else 503,
                        text="ok\n" if ready else "starting: no report yet\n")


async def _report(request: web.Request) -> web.Response:
    api = _api(request)
    if wants_refresh(request):
        try:
            await api.refresh()
        except RateLimited as exc:
            return web.Response(status=429, text=f"refresh rate-limited: {exc}\n",
                                headers={"Retry-After": str(max(1, round(exc.retry_after_s)))})
    return _body(api.report_body())


async def _snapshot(request: web.Request) -> web.Response:
    return _body(_api(request).snapshot_body())


async def _health(request: web.Request) -> web.Response:
    return web.Response(body=_api(request).health_body(), content_type=JSON)


def _body(body: bytes | None) -> web.Response:
    if body is None:
        return web.Response(status=503, text="starting: no report yet\n",
                            headers={"Retry-After": "5"})
    return web.Response(body=body, content_type=JSON)


async def _metrics(request: web.Request) -> web.Response:
    body = _api(request).metrics_body()
    headers = {"Content-Type": CONTENT_TYPE, "Vary": "Accept-Encoding"}
    if accepts_gzip(request.headers.get("Accept-Encoding")):
        body = gzipped(body)
        headers["Content-Encoding"] = "gzip"
    return web.Response(body=body, headers=headers)


async def _clear(request: web.Request) -> web.Response:
    if _token(request) is None:  # never a state change without a token
        return web.Response(status=403, text="clearing over HTTP needs agent.token_file; "
                                             "use clusterdiag agent --clear on the node\n")
    event_id = request.match_info["event_id"]
    if not ID_RE.match(event_id):
        return web.Response(status=400, text="bad id\n")
    cleared = await _api(request).clear(event_id)
    if not cleared:
        return web.Response(status=404, text="no active event with that id\n")
    return web.json_response({"cleared": cleared})


class _OneLineHttpErrors(logging.Filter):
    """aiohttp logs every malformed request as an error with a traceback: any client on
    the network could fill the journal with 1 KB per 100-byte request, and break the
    one-line ``key=value`` log. A client's bad request becomes one debug line; anything
    else aiohttp reports stays an error, on one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        client = isinstance(exc, HttpProcessingError)
        record.msg, record.args = ("http_bad_request" if client else "http_error"), ()
        if exc is not None:
            record.error = " ".join(str(exc).split())[:200]
        record.exc_info, record.exc_text = None, None
        if client:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger("clusterdiag").isEnabledFor(record.levelno)


HTTP_LOG = logging.getLogger("clusterdiag.agent.http")
HTTP_LOG.addFilter(_OneLineHttpErrors())


def make_app(resolve: Resolve, token: Callable[[], str | None],
             unauthenticated: frozenset[str] = frozenset()) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY, middlewares=[_guard])
    app[_API] = resolve
    app[_TOKEN] = token
    app[_OPEN] = frozenset({"/healthz"}) | unauthenticated
    app[_REFRESHING] = set()
    app[_SLOTS] = asyncio.Semaphore(MAX_CONCURRENT)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/v1/report", _report)
    app.router.add_get("/v1/snapshot", _snapshot)
    app.router.add_get("/v1/health", _health)
    app.router.add_get("/metrics", _metrics)
    app.router.add_post("/v1/clear/{event_id}", _clear)
    return app


class Served:
    """A running API: its gates (one per listening address) and what to close."""

    def __init__(self, runner: web.AppRunner, gates: list[Gate],
                 listeners: list[socket.socket], tasks: list[asyncio.Task[None]]) -> None:
        self.runner, self.gates, self._listeners, self._tasks = runner, gates, listeners, tasks

    async def cleanup(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for listener in self._listeners:
            listener.close()
        await self.runner.cleanup()


def waiting_for_request(protocol: asyncio.Protocol) -> bool:
    """Whether aiohttp's handler on this connection waits for its next request (the gate
    may close it for a new one), not reading, handling or answering one. It is the test
    aiohttp makes itself before its keep-alive close: ``RequestHandler._process_keepalive``
    in aiohttp/web_protocol.py (3.14.5, line 564: ``if self._waiter and not
    self._waiter.done()``; ``start()`` sets ``_waiter`` while it waits, line 631). The
    attribute is aiohttp's own, not promised: without it every connection counts as busy,
    so none is ever cut, only no longer evicted (tests/unit/test_gate.py pins it)."""
    waiter = getattr(protocol, "_waiter", None)
    return isinstance(waiter, asyncio.Future) and not waiter.done()


def _listen(host: str, port: int) -> socket.socket:
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def serve(app: web.Application, hosts: list[str], port: int,
                tls: ssl.SSLContext | None = None) -> tuple[Served, int]:
    """Listen on every host at one port, each behind a connection gate (gate.py); port 0
    picks a free one on the first host and reuses it for the rest. Returns what to clean
    up and the port."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False, logger=HTTP_LOG,
                           **HANDLER_LIMITS)
    await runner.setup()
    listeners: list[socket.socket] = []
    try:
        for host in hosts:
            listeners.append(_listen(host, port))
            if port == 0:
                port = int(listeners[0].getsockname()[1])
    except BaseException:
        for listener in listeners:
            listener.close()
        await runner.cleanup()
        raise
    factory = runner.server
    assert factory is not None
    gates = [Gate(factory, tls, waiting_for_request) for _ in listeners]
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(gate.serve(listener)) for gate, listener in zip(
        gates, listeners, strict=True)]
    return Served(runner, gates, listeners, tasks), port
