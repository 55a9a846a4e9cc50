"""Load and process probes shared by the daemon load tests and bench/agent_http_load.py.

The load runs in the caller's process on one asyncio loop (aiohttp client, loopback only):
``clients`` workers, each on its own connection, each sending its next request as soon as
the last one is answered, for ``seconds``. Anything but a 200 with a body is an error and
is counted by kind, so a failing run says what failed, not only how many.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp


@dataclass
class LoadResult:
    latencies_s: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    by_path: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def requests(self) -> int:
        return len(self.latencies_s) + sum(self.errors.values())

    @property
    def median_ms(self) -> float:
        return 1000 * statistics.median(self.latencies_s) if self.latencies_s else 0.0

    @property
    def p99_ms(self) -> float:
        if not self.latencies_s:
            return 0.0
        ordered = sorted(self.latencies_s)
        return 1000 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]

    def summary(self) -> str:
        return (f"{self.requests} requests in {self.seconds:.1f} s "
                f"({self.requests / max(self.seconds, 1e-9):.0f}/s), "
                f"median {self.median_ms:.1f} ms, p99 {self.p99_ms:.1f} ms, "
                f"errors {dict(self.errors) or 0}")


async def _worker(session: aiohttp.ClientSession, url: str, paths: list[str], offset: int,
                  until: float, result: LoadResult, timeout: aiohttp.ClientTimeout) -> None:
    i = offset
    while time.monotonic() < until:
        path = paths[i % len(paths)]
        i += 1
        started = time.perf_counter()
        try:
            async with session.get(url + path, timeout=timeout) as resp:
                body = await resp.read()
                if resp.status != 200 or not body:
                    result.errors[f"{path} {resp.status}"] += 1
                    continue
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            result.errors[f"{path} {type(exc).__name__}"] += 1
            continue
        result.latencies_s.append(time.perf_counter() - started)
        result.by_path[path] += 1


CLIENTS_PER_ADDRESS = 16  # below the agent's per-client connection cap (daemon/gate.py)


def source_address(index: int) -> str:
    """The loopback address client ``index`` connects from: 200 scrapers are many hosts,
    and the agent holds one host to a few dozen connections."""
    return f"127.0.0.{10 + index // CLIENTS_PER_ADDRESS}"


async def _hammer(url: str, paths: list[str], clients: int, seconds: float,
                  token: str | None) -> LoadResult:
    result = LoadResult()
    headers = {"Authorization": f"Bearer {token}"} if token else None
    timeout = aiohttp.ClientTimeout(total=30)
    groups = range(0, clients, CLIENTS_PER_ADDRESS)
    # one connection per client, as 200 scrapers or curl loops would be; never a proxy
    sessions = [aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=CLIENTS_PER_ADDRESS, force_close=False,
                                       local_addr=(source_address(first), 0)),
        headers=headers, trust_env=False) for first in groups]
    try:
        started = time.monotonic()
        until = started + seconds
        await asyncio.gather(*(_worker(sessions[n // CLIENTS_PER_ADDRESS], url, paths, n,
                                       until, result, timeout) for n in range(clients)))
        result.seconds = time.monotonic() - started
    finally:
        for session in sessions:
            await session.close()
    return result


def hammer(url: str, paths: list[str], clients: int = 200, seconds: float = 10.0,
           token: str | None = None) -> LoadResult:
    """``clients`` concurrent keep-alive clients cycling through ``paths`` for ``seconds``."""
    return asyncio.run(_hammer(url, paths, clients, seconds, token))


def rss_kib(pid: int) -> int:
    """VmRSS of a process from /proc/PID/status, in KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise ValueError(f"no VmRSS for pid {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the agent closed ``sock`` (an idle flood connection): end of stream or a
    reset, without waiting for data that never comes."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def self_signed_cert(where: Path) -> tuple[Path, Path] | str:
    """A P-256 certificate and key for 127.0.0.1 under ``where``, or why openssl could
    not make one."""
    crt, key = where / "agent.crt", where / "agent.key"
    proc = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
         "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(crt)],
        capture_output=True, check=False)
    if proc.returncode != 0:
        return f"openssl cannot make a certificate: {proc.stderr[:200]!r}"
    return crt, key
