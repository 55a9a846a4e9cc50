"""Admitting connections to the agent's HTTP API, before one costs more than a descriptor.

Every connection holds a descriptor, and the agent reads the hardware through descriptors
too: ~1,000 idle connections (no token needed to open one) use up a unit's default
open-file limit (soft 1,024: systemd-system.conf(5), "DefaultLimitNOFILE= defaults to
1024:524288"), after which every sysfs read fails and a healthy node would be reported
without its GPUs. So the agent accepts connections itself and keeps at most ``cap`` open
(never more than the open-file limit less ``FD_RESERVE`` kept for collections, state files
and the NVML worker, and at most ``MAX_CONNECTIONS``, or ``MAX_TLS_CONNECTIONS`` with TLS,
which bound the memory idle connections cost) and at most ``PER_CLIENT`` from one address
(the many-from-one case: such a connection is closed at once). A TLS connection costs more:
asyncio's SSLProtocol allocates a read buffer of ``max_size`` bytes for each one, 256 KiB
by default (CPython 3.11+ Lib/asyncio/sslproto.py, ``max_size = 256 * 1024``,
``bytearray(self.max_size)`` in ``SSLProtocol.__init__``). The agent's requests and answers
are small, so a TLS gate lowers it to ``TLS_READ_BUFFER`` for the agent's process (a record
is at most 16 KiB of plaintext, RFC 8446 §5.1; the buffer is a stream chunk, and
``_do_read__copied`` reads records until the BIO is empty whatever its size): ~280 KiB per
idle TLS connection becomes ~65 KiB, so the TLS budget can hold a flood of 1,100 addresses
without evicting (bench/agent_flood.py measures the agent's RSS under it).

A full budget must not lock out the prolog's host or Prometheus when a flood comes from
many addresses, each holding only one or two connections. So:

- When the budget is full, the connection idle longest is closed to admit the new one,
  whatever its address. Idle means no request in progress: the HTTP handler waits for the
  next request (aiohttp's own test before its keep-alive close; ``idle`` is given by
  server.py), a TLS handshake is still running, or a request has not arrived whole. A
  request being handled or answered is never cut. Connections are kept in the order of
  their last whole request (accept for a new one); a busy one met while looking for the
  longest-idle is moved to the back, since it is active now.
- ``/healthz`` and ``/metrics`` keep a reserved share: at most ``cap`` less
  ``cap // PROBE_SHARE`` connections may have a request to any other path in progress.
  The path is not known at accept, so every connection is admitted (by eviction when
  full) and classified by the request line its client sends next, before the HTTP handler
  sees it: a request for another path beyond that share is answered 503 and closed. So at
  least ``cap // PROBE_SHARE`` connections are always idle (evictable) or serving a probe,
  and a new probe connection always finds a place. The first bytes of a request are held
  until its request line is whole (its CRLF, or ``REQUEST_LINE_MAX`` bytes, beyond which
  aiohttp refuses the line anyway), however many TCP segments carry it: a probe is never
  counted as another path for arriving in pieces. While held, the connection is idle
  (evictable) and aiohttp's keep-alive limit runs as for any request not yet whole.

A TLS handshake must finish within ``HANDSHAKE_S`` (asyncio's default holds an unfinished
one 60 s). Slow senders are cut by aiohttp's keep-alive limit (server.py); here a
connection is counted from accept to close, handshake included.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import socket
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ssl

log = logging.getLogger("clusterdiag.agent")

MAX_CONNECTIONS = 4096
MAX_TLS_CONNECTIONS = 2048
TLS_READ_BUFFER = 32 * 1024
PER_CLIENT = 32
FD_RESERVE = 128
MIN_CONNECTIONS = 8
PROBE_SHARE = 8  # one connection in 8 is kept for /healthz and /metrics
PROBE_PATHS = frozenset({b"/healthz", b"/metrics"})
HANDSHAKE_S = 5.0
ACCEPT_RETRY_S = 0.5
REFUSAL_LOG_S = 60.0  # at most one log line a minute about refused connections
REQUEST_LINE_MAX = 4096  # server.py's max_line_size: a longer one is refused there anyway
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
        b"Content-Length: 5\r\nRetry-After: 1\r\nConnection: close\r\n\r\nbusy\n")

Idle = Callable[[asyncio.Protocol], bool]


def connection_cap(wanted: int = MAX_CONNECTIONS) -> int:
    """At most ``wanted``, and leave FD_RESERVE of the open-file limit to everything else."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(MIN_CONNECTIONS, min(wanted, int(soft) - FD_RESERVE))


def request_path(data: bytes) -> bytes | None:
    """The path of the request line that starts ``data`` (``GET /metrics?x HTTP/1.1`` ->
    ``/metrics``), or None when the line is not whole or not a request line."""
    line, crlf, _ = data[:REQUEST_LINE_MAX].partition(b"\r\n")
    parts = line.split(b" ")
    if not crlf or len(parts) != 3:
        return None
    return parts[1].partition(b"?")[0]


class _Conn:
    """One admitted connection, from accept to close."""

    def __init__(self, gate: Gate, client: str, sock: socket.socket) -> None:
        self.gate, self.client, self.sock = gate, client, sock
        self.protocol: _Counted | None = None
        self.task: asyncio.Task[None] | None = None
        self.released = False

    def idle(self) -> bool:
        """No request in progress: still in its TLS handshake, or its handler waits."""
        protocol = self.protocol
        if protocol is None or protocol.transport is None:
            return True
        return self.gate.idle(protocol.inner)

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.gate._release(self)

    def evict(self) -> None:
        """Close this connection now: its place is given to another."""
        self.release()
        if self.protocol is not None and self.protocol.transport is not None:
            self.protocol.transport.abort()
        elif self.task is not None:  # still in its TLS handshake
            self.task.cancel()


class _Counted(asyncio.Protocol):
    """The HTTP protocol, with each request classified on arrival and the connection given
    back to the gate when it closes."""

    def __init__(self, inner: asyncio.Protocol, conn: _Conn) -> None:
        self.inner, self.conn = inner, conn
        self.transport: asyncio.Transport | None = None
        self.head = b""  # a new request's first bytes, until its request line is whole

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if isinstance(transport, asyncio.Transport):
            self.transport = transport
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not self.conn.idle():  # a request in progress: its bytes go on as they come
            self.inner.data_received(data)
            return
        data = self.head + data
        if b"\r\n" not in data and len(data) < REQUEST_LINE_MAX:
            self.head = data  # the request line is not whole yet
            return
        self.head = b""
        if not self.conn.gate._may_start(self.conn, request_path(data)):
            if self.transport is not None:
                self.transport.write(BUSY)
                self.transport.close()
            return
        self.inner.data_received(data)
        if not self.conn.idle():  # a whole request arrived: active now
            self.conn.gate._touch(self.conn)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn.release()
        self.inner.connection_lost(exc)


def _shrink_tls_read_buffer() -> None:
    """Give every later TLS connection of this process a ``TLS_READ_BUFFER`` read buffer
    (see the module docstring). Python 3.10's SSLProtocol keeps no such buffer (its
    _SSLPipe reads into a new bytes object per call) and has no ``max_size``: nothing to
    change there."""
    import asyncio.sslproto  # the class connect_accepted_socket builds for a TLS connection

    protocol: Any = asyncio.sslproto.SSLProtocol  # max_size is not in typeshed's stub
    if getattr(protocol, "max_size", 0) > TLS_READ_BUFFER:
        protocol.max_size = TLS_READ_BUFFER


class Gate:
    """Accepts on one listening socket and hands admitted connections to ``factory``;
    ``idle`` says whether a protocol ``factory`` made has no request in progress."""

    def __init__(self, factory: Callable[[], asyncio.Protocol], tls: ssl.SSLContext | None,
                 idle: Idle, cap: int | None = None, per_client: int = PER_CLIENT) -> None:
        self.factory, self.tls, self.idle = factory, tls, idle
        if tls is not None:
            _shrink_tls_read_buffer()
        if cap is None:
            cap = connection_cap(MAX_CONNECTIONS if tls is None else MAX_TLS_CONNECTIONS)
        self.cap = cap
        self.per_client = min(per_client, self.cap)
        self.general_cap = self.cap - max(1, self.cap // PROBE_SHARE)
        self.by_client: Counter[str] = Counter()
        self._open: OrderedDict[int, _Conn] = OrderedDict()  # longest-idle first
        self._general: set[_Conn] = set()  # may have a request to another path in progress
        self.refused = self.evicted = self.turned_away = 0
        self._logged_at = 0.0
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def total(self) -> int:
        return len(self._open)

    async def serve(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, addr = await loop.sock_accept(listener)
            except OSError as exc:
                # EMFILE and the like: wait instead of spinning on a queue we cannot take
                # from; the connections already in are served meanwhile.
                self._note("accept_failed", error=exc.strerror or str(exc),
                           errno=errno.errorcode.get(exc.errno or 0, ""))
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            client = str(addr[0])
            if not self.admit(client):
                self.refused += 1
                sock.close()
                self._note("connection_refused", client=client, open=self.total,
                           cap=self.cap, per_client=self.per_client, refused=self.refused,
                           evicted=self.evicted)
                continue
            self._start(loop, self.add(client, sock))
            # sock_accept returns at once while the backlog holds connections, without a
            # turn of the loop: an evicted connection's socket is closed by a callback
            # (transport.abort, the cancelled handshake) that must run before the next
            # accept, or a flood holds twice the budget in descriptors.
            await asyncio.sleep(0)

    def admit(self, client: str) -> bool:
        """Whether a new connection from ``client`` may come in; when the budget is full,
        the longest-idle connection is closed to make room."""
        if self.by_client[client] >= self.per_client:
            return False
        return self.total < self.cap or self._evict_longest_idle()

    def add(self, client: str, sock: socket.socket) -> _Conn:
        conn = _Conn(self, client, sock)
        self._open[id(conn)] = conn
        self.by_client[client] += 1
        return conn

    def _evict_longest_idle(self) -> bool:
        for key in list(self._open):
            conn = self._open[key]
            if conn.idle():
                conn.evict()
                self.evicted += 1
                return True
            self._open.move_to_end(key)  # busy: active now
        return False

    def _touch(self, conn: _Conn) -> None:
        if not conn.released:
            self._open.move_to_end(id(conn))

    def _may_start(self, conn: _Conn, path: bytes | None) -> bool:
        """Whether a request for ``path`` may start on ``conn``: always for a probe, for
        any other path while fewer than ``general_cap`` such requests are in progress."""
        if path in PROBE_PATHS:
            self._general.discard(conn)
            return True
        if len(self._general) >= self.general_cap:
            self._general = {c for c in self._general if not c.idle()}
        if len(self._general) >= self.general_cap:
            self.turned_away += 1
            self._note("request_turned_away", client=conn.client, open=self.total,
                       cap=self.cap, busy=len(self._general), turned_away=self.turned_away)
            return False
        self._general.add(conn)
        return True

    def _release(self, conn: _Conn) -> None:
        self._open.pop(id(conn), None)
        self._general.discard(conn)
        self.by_client[conn.client] -= 1
        if self.by_client[conn.client] <= 0:
            del self.by_client[conn.client]

    def _start(self, loop: asyncio.AbstractEventLoop, conn: _Conn) -> None:
        def counted() -> _Counted:
            conn.protocol = _Counted(self.factory(), conn)
            return conn.protocol

        async def start() -> None:
            try:
                await loop.connect_accepted_socket(
                    counted, conn.sock, ssl=self.tls,
                    ssl_handshake_timeout=HANDSHAKE_S if self.tls is not None else None)
            except (OSError, asyncio.TimeoutError, asyncio.CancelledError):
                # a handshake that failed (ssl.SSLError is an OSError), timed out or was
                # evicted: no protocol saw it
                conn.release()
                with contextlib.suppress(OSError):
                    conn.sock.close()

        conn.task = loop.create_task(start())
        self._tasks.add(conn.task)
        conn.task.add_done_callback(self._tasks.discard)

    def _note(self, event: str, **fields: Any) -> None:
        now = time.monotonic()
        if now - self._logged_at >= REFUSAL_LOG_S:
            self._logged_at = now
            log.warning(event, extra=fields)
