"""A forked worker that streams JSON lines to its parent: how NVML is kept out of the
process that must stay responsive.

NVML calls can block in the driver for minutes. Run in a child, a wedged call costs a
SIGKILL at the deadline instead of a hung prolog or agent. The child keeps nothing of the
parent but its pipe: its own session (no signal meant for the parent's group), stdio on
/dev/null (it never holds Slurm's or journald's pipes), every other fd closed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any

Emit = Callable[[dict[str, Any]], None]

_RESULT_FD = 3


def fork_worker(body: Callable[[Emit], None]) -> tuple[int, int]:
    """Fork a child running ``body(emit)``; returns (pid, read end of its JSON-lines pipe).

    Call before starting threads where possible: a child forked from a threaded parent
    inherits locks held by threads that do not exist in it. An exception in ``body``
    reaches the parent as a ``{"t": "crash"}`` line, never as a traceback on our stderr.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            os.setsid()
            for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                signal.signal(signum, signal.SIG_DFL)
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            if write_fd != _RESULT_FD:
                os.dup2(write_fd, _RESULT_FD)
            os.closerange(_RESULT_FD + 1, 65536)
            out = os.fdopen(_RESULT_FD, "w", buffering=1)

            def emit(message: dict[str, Any]) -> None:
                out.write(json.dumps(message) + "\n")

            try:
                body(emit)
            except Exception as exc:  # noqa: BLE001 - reported to the parent as data
                emit({"t": "crash", "error": f"{type(exc).__name__}: {exc}"[:300]})
            out.flush()
        finally:
            os._exit(0)
    os.close(write_fd)
    return pid, read_fd


def stop_worker(pid: int, kill: bool) -> None:
    """Reap the worker, SIGKILLing it first when ``kill``; waits at most ~0.1 s.

    A worker in uninterruptible sleep (a GPU off the bus, deep in the driver) cannot die
    until it leaves the driver: it is left behind then, and init reaps it later."""
    if kill:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for _ in range(20):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done:
            return
        time.sleep(0.005)
