"""The agent's connection gate: the longest-idle connection makes room when the budget is
full, a request in progress is never cut, /healthz and /metrics keep their share."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator

import pytest
from aiohttp import web

from clusterdiag.agent.daemon import gate as gate_module
from clusterdiag.agent.daemon.gate import Gate
from clusterdiag.agent.daemon.server import serve

REQUEST = b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n"


class FakeHttp(asyncio.Protocol):
    """Stands for aiohttp's handler: busy from a whole request until the test ends it."""

    def __init__(self) -> None:
        self.idle, self.got, self.lost = True, b"", False

    def data_received(self, data: bytes) -> None:
        self.got += data
        self.idle = False

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True


class Rig:
    """A gate on a real event loop, fed socket pairs as accepted connections."""

    def __init__(self, cap: int) -> None:
        self.protocols: list[FakeHttp] = []
        self.gate = Gate(self._make, None, idle=lambda p: p.idle, cap=cap)  # type: ignore[attr-defined]
        self.peers: list[socket.socket] = []

    def _make(self) -> FakeHttp:
        self.protocols.append(FakeHttp())
        return self.protocols[-1]

    async def connect(self, client: str) -> tuple[bool, socket.socket]:
        """A new connection from ``client``: whether it was admitted, and its client end."""
        ours, theirs = socket.socketpair()
        self.peers.append(theirs)
        if not self.gate.admit(client):
            ours.close()
            return False, theirs
        self.gate._start(asyncio.get_running_loop(), self.gate.add(client, ours))
        await settle()
        return True, theirs


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def closed(peer: socket.socket) -> bool:
    peer.setblocking(False)
    try:
        return peer.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


@contextlib.contextmanager
def rig(cap: int) -> Iterator[Rig]:
    made = Rig(cap)
    try:
        yield made
    finally:
        for peer in made.peers:
            peer.close()


def test_a_full_gate_closes_the_longest_idle_connection_whatever_its_address() -> None:
    async def main() -> None:
        with rig(cap=3) as r:
            peers = [(await r.connect(f"10.0.0.{i}"))[1] for i in range(3)]
            # the first connection asks something and is answered: no longer the longest idle
            peers[0].sendall(REQUEST % b"/v1/report")
            await settle()
            r.protocols[0].idle = True
            admitted, _ = await r.connect("10.0.0.99")
            await settle()
            assert admitted
            assert [closed(p) for p in peers] == [False, True, False]
            assert r.gate.total == 3
            assert r.gate.evicted == 1
            assert r.protocols[1].lost
            assert not r.protocols[0].lost

    asyncio.run(main())


def test_a_connection_with_a_request_in_progress_is_never_evicted() -> None:
    async def main() -> None:
        with rig(cap=2) as r:
            _, busy = await r.connect("10.0.0.1")
            busy.sendall(REQUEST % b"/v1/report")
            _, idle = await r.connect("10.0.0.2")
            await settle()
            assert (await r.connect("10.0.0.3"))[0]
            await settle()
            assert not closed(busy)
            assert closed(idle)
            r.protocols[2].idle = False  # both open ones are now handling a request
            assert not (await r.connect("10.0.0.4"))[0]
            assert not closed(busy)
            assert r.gate.refused == 0

    asyncio.run(main())


def test_healthz_and_metrics_keep_a_share_of_the_budget() -> None:
    async def main() -> None:
        with rig(cap=8) as r:  # one connection in 8 is kept for the probes
            for i in range(7):
                peer = (await r.connect(f"10.0.0.{i}"))[1]
                peer.sendall(REQUEST % b"/v1/report")
            await settle()
            assert all(not p.idle for p in r.protocols)
            _, late = await r.connect("10.0.1.1")
            late.sendall(REQUEST % b"/v1/snapshot")
            await settle()
            late.setblocking(True)
            assert late.recv(4096).startswith(b"HTTP/1.1 503 ")
            assert r.protocols[-1].got == b""  # the handler never saw it
            await settle()
            for path in (b"/healthz", b"/metrics?x=1"):
                _, probe = await r.connect("10.0.1.2")
                probe.sendall(REQUEST % path)
                await settle()
                assert r.protocols[-1].got == REQUEST % path
                r.protocols[-1].idle = True  # answered
            assert r.gate.turned_away == 1

    asyncio.run(main())


def test_a_probe_whose_request_line_comes_in_two_writes_keeps_its_share() -> None:
    """The request line split across TCP segments is classified once whole: a /healthz
    sent in two writes during a flood is served, and the connection stays idle (evictable)
    while its line is not whole."""
    async def main() -> None:
        with rig(cap=8) as r:
            for i in range(7):
                peer = (await r.connect(f"10.0.0.{i}"))[1]
                peer.sendall(REQUEST % b"/v1/report")
            await settle()
            _, probe = await r.connect("10.0.1.2")
            whole = REQUEST % b"/healthz"
            probe.sendall(whole[:8])  # "GET /hea"
            await settle()
            assert r.protocols[-1].got == b""
            assert list(r.gate._open.values())[-1].idle()  # evictable while it waits
            probe.sendall(whole[8:])
            await settle()
            assert r.protocols[-1].got == whole
            assert not closed(probe)
            assert r.gate.turned_away == 0

    asyncio.run(main())


@contextlib.asynccontextmanager
async def slow_server(release: asyncio.Event) -> AsyncIterator[tuple[Gate, int]]:
    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response(text="done\n")

    app = web.Application()
    app.router.add_get("/slow", slow)
    served, port = await serve(app, ["127.0.0.1"], 0)
    try:
        yield served.gates[0], port
    finally:
        await served.cleanup()


def test_aiohttp_says_when_a_connection_waits_for_its_next_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Against aiohttp itself: a connection reading nothing is idle, one whose handler
    runs is not, and a full gate closes the idle one for a newcomer, never the busy one."""
    monkeypatch.setattr(gate_module, "connection_cap", lambda wanted: 2)

    async def main() -> None:
        release = asyncio.Event()
        async with slow_server(release) as (gate, port):
            busy_r, busy_w = await asyncio.open_connection("127.0.0.1", port,
                                                          local_addr=("127.0.0.2", 0))
            busy_w.write(REQUEST % b"/slow")
            await busy_w.drain()
            idle_r, idle_w = await asyncio.open_connection("127.0.0.1", port,
                                                          local_addr=("127.0.0.3", 0))
            await asyncio.sleep(0.2)
            assert sorted(c.idle() for c in gate._open.values()) == [False, True]
            _new_r, new_w = await asyncio.open_connection("127.0.0.1", port,
                                                        local_addr=("127.0.0.4", 0))
            assert await asyncio.wait_for(idle_r.read(), 10) == b""  # evicted
            assert gate.evicted == 1  # not aiohttp's keep-alive close
            release.set()
            answer = await asyncio.wait_for(busy_r.readuntil(b"done\n"), 10)
            assert answer.startswith(b"HTTP/1.1 200 ")
            await asyncio.sleep(0.2)
            assert all(c.idle() for c in gate._open.values())
            for writer in (busy_w, idle_w, new_w):
                writer.close()

    asyncio.run(main())


def test_a_tls_gate_gives_each_connection_a_small_read_buffer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """asyncio allocates max_size bytes per TLS connection (256 KiB by default): a TLS
    gate lowers it, so its budget of idle connections costs a quarter of the memory."""
    import asyncio.sslproto
    import ssl

    if not hasattr(asyncio.sslproto.SSLProtocol, "max_size"):
        pytest.skip("Python 3.10's SSLProtocol allocates no per-connection read buffer")
    monkeypatch.setattr(asyncio.sslproto.SSLProtocol, "max_size", 256 * 1024)
    Gate(FakeHttp, None, idle=lambda p: True, cap=8)
    assert asyncio.sslproto.SSLProtocol.max_size == 256 * 1024  # type: ignore[attr-defined]
    Gate(FakeHttp, ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), idle=lambda p: True, cap=8)
    assert asyncio.sslproto.SSLProtocol.max_size == gate_module.TLS_READ_BUFFER  # type: ignore[attr-defined]
    assert gate_module.TLS_READ_BUFFER >= 2 * 16 * 1024  # a whole record, and the next
