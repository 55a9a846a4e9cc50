"""A throwaway systemd machine for tests: systemd-nspawn over a volatile copy of this host
(systemd-nspawn --volatile=yes): a tmpfs root with the host's /usr read-only, no network but its own
loopback, booted to multi-user in about a second and powered off cleanly."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

# Masked: with an empty /etc firstboot would prompt, and with a private network
# wait-online would hold the boot (and After=network-online.target) for two minutes.
MASKED = ("systemd-firstboot.service", "systemd-networkd-wait-online.service")


def require_nspawn() -> str:
    nspawn = shutil.which("systemd-nspawn")
    if nspawn is None:
        pytest.skip("systemd-nspawn not installed (apt-get install systemd-container)")
    if os.geteuid() != 0:
        pytest.skip("systemd-nspawn needs root")
    return nspawn


def container_init(nspawn_pid: int, timeout: float) -> int:
    """The container's PID 1 (systemd), seen from the host."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["ps", "--ppid", str(nspawn_pid), "-o", "pid=,comm="],
                             capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            pid, _, comm = line.strip().partition(" ")
            if comm.strip() == "systemd":
                return int(pid)
        time.sleep(0.1)
    raise AssertionError("the container's systemd did not start")


def inside(init: int, *argv: str, timeout: float = 30,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command in every namespace of the container, with a clean environment (the
    host's PATH, virtualenv and pip settings stay out)."""
    clean = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LANG": "C.UTF-8",
             **(env or {})}
    return subprocess.run(["nsenter", "-t", str(init), "-a", "env", "-i",
                           *(f"{k}={v}" for k, v in clean.items()), *argv],
                          capture_output=True, text=True, check=False, timeout=timeout)


def wait_running(init: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        state = inside(init, "systemctl", "is-system-running").stdout.strip()
        if state in ("running", "degraded"):
            return
        time.sleep(0.2)
    raise AssertionError(f"the container did not finish booting: {state}")


@contextmanager
def booted(log: Path, *options: str) -> Iterator[int]:
    """Boot the container with extra nspawn ``options`` (binds, tmpfs); yields its init."""
    nspawn = require_nspawn()
    masks = [f"--bind-ro=/dev/null:/etc/systemd/system/{unit}" for unit in MASKED]
    machine = f"cdtest{os.getpid()}{time.monotonic_ns() % 100000}"
    with log.open("w") as out:
        container = subprocess.Popen(
            [nspawn, "-D", "/", "--volatile=yes", "--private-network", "--register=no",
             "--keep-unit", "-M", machine, "--console=passive", *masks, *options, "-b"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        try:
            init = container_init(container.pid, 30)
            wait_running(init, 60)
            yield init
        finally:
            container.send_signal(signal.SIGTERM)  # a clean poweroff of the container
            try:
                container.wait(30)
            except subprocess.TimeoutExpired:
                container.kill()
                container.wait(10)
