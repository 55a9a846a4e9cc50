"""Admitting connections to the agent's HTTP API, before one costs more than a descriptor.

Every connection holds a descriptor, and the agent reads the hardware through descriptors
too: ~1,000 idle connections (no token needed to open one) once used up the open-file
limit, every sysfs read then failed and a healthy node was reported without its GPUs. So
the agent accepts connections itself and keeps at most ``cap`` open (never more than the
open-file limit less ``FD_RESERVE`` kept for collections, state files and the NVML worker)
and at most ``PER_CLIENT`` from one address. When the total is reached, a new connection
from an address holding fewer than the heaviest one takes the place of that one's oldest
(so a flood from many addresses cannot lock out the prolog's host or Prometheus); else it
is closed at once. A TLS handshake must finish within ``HANDSHAKE_S`` (asyncio's default holds an
unfinished one 60 s). Idle and slow connections are aiohttp's keep-alive limit's
(server.py); here a connection is counted from accept to close, handshake included.

The total stays far below 1,024 descriptors on purpose: the NVML reader waits on its pipe
with select(), which cannot watch a descriptor numbered 1,024 or more.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import socket
import ssl
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

log = logging.getLogger("clusterdiag.agent")

MAX_CONNECTIONS = 512
PER_CLIENT = 32
FD_RESERVE = 128
MIN_CONNECTIONS = 8
HANDSHAKE_S = 5.0
ACCEPT_RETRY_S = 0.5
REFUSAL_LOG_S = 60.0  # at most one log line a minute about refused connections


def connection_cap(wanted: int = MAX_CONNECTIONS) -> int:
    """At most ``wanted``, and leave FD_RESERVE of the open-file limit to everything else."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(MIN_CONNECTIONS, min(wanted, int(soft) - FD_RESERVE))


class _Counted(asyncio.Protocol):
    """The HTTP protocol, with the connection given back to the gate when it closes."""

    def __init__(self, inner: asyncio.Protocol, release: Callable[[], None]) -> None:
        self.inner, self.release = inner, release
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if isinstance(transport, asyncio.Transport):
            self.transport = transport
        self.inner.connection_made(transport)

    def evict(self) -> bool:
        """Close this connection now (its place is given to another client)."""
        if self.transport is None:
            return False
        self.release()
        self.transport.abort()
        return True

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.release()
        self.inner.connection_lost(exc)


class Gate:
    """Accepts on one listening socket and hands admitted connections to ``factory``."""

    def __init__(self, factory: Callable[[], asyncio.Protocol], tls: ssl.SSLContext | None,
                 cap: int | None = None, per_client: int = PER_CLIENT) -> None:
        self.factory, self.tls = factory, tls
        self.cap = connection_cap() if cap is None else cap
        self.per_client = min(per_client, self.cap)
        self.by_client: Counter[str] = Counter()
        self._open: dict[str, dict[int, _Counted]] = defaultdict(dict)  # oldest first
        self.total = 0
        self.refused = 0
        self._logged_at = 0.0
        self._tasks: set[asyncio.Task[Any]] = set()

    async def serve(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, addr = await loop.sock_accept(listener)
            except OSError as exc:
                # EMFILE and the like: wait instead of spinning on a queue we cannot take
                # from; the connections already in are served meanwhile.
                self._note("accept_failed", error=exc.strerror or str(exc),
                           errno=errno.errorcode.get(exc.errno or 0, ""))
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            client = str(addr[0])
            if self.by_client[client] >= self.per_client or (
                    self.total >= self.cap and not self._evict_for(client)):
                self.refused += 1
                conn.close()
                self._note("connection_refused", client=client, open=self.total,
                           cap=self.cap, per_client=self.per_client, refused=self.refused)
                continue
            self._admit(loop, conn, client)

    def _evict_for(self, client: str) -> bool:
        """Make room for ``client`` by closing the oldest connection of the address that
        holds the most, if that is more than ``client`` would then hold."""
        heaviest, most = max(self.by_client.items(), key=lambda item: item[1],
                             default=("", 0))
        if most <= self.by_client[client] + 1:
            return False
        return any(conn.evict() for conn in list(self._open[heaviest].values())[:4])

    def _admit(self, loop: asyncio.AbstractEventLoop, conn: socket.socket, client: str) -> None:
        self.total += 1
        self.by_client[client] += 1
        released = False
        key = id(conn)

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self.total -= 1
            self.by_client[client] -= 1
            self._open[client].pop(key, None)
            if self.by_client[client] <= 0:
                del self.by_client[client]
                del self._open[client]

        def counted() -> _Counted:
            protocol = _Counted(self.factory(), release)
            if not released:
                self._open[client][key] = protocol
            return protocol

        async def start() -> None:
            try:
                await loop.connect_accepted_socket(
                    counted, conn, ssl=self.tls,
                    ssl_handshake_timeout=HANDSHAKE_S if self.tls is not None else None)
            except (OSError, asyncio.TimeoutError, ssl.SSLError):
                # a handshake that failed or timed out: no protocol ever saw it
                release()
                with contextlib.suppress(OSError):
                    conn.close()

        task = loop.create_task(start())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _note(self, event: str, **fields: Any) -> None:
        now = time.monotonic()
        if now - self._logged_at >= REFUSAL_LOG_S:
            self._logged_at = now
            log.warning(event, extra=fields)
