"""Whether processes a test started (or their children) still run: for the tests that check
nothing outlives a deadline. A killed process is gone only once the kernel has run its
exit, which on a loaded machine can come a while after the kill, so the check waits."""

from __future__ import annotations

import time
from pathlib import Path

GONE_WITHIN_S = 30.0  # a guard: something that outlived its kill would live on far longer


def running(pid: int) -> bool:
    """Alive and not a zombie (whoever inherited an orphan may never reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def still_running(pids: list[int], timeout: float = GONE_WITHIN_S) -> list[int]:
    """The pids still running after waiting up to ``timeout`` for every one to go."""
    until = time.monotonic() + timeout
    while time.monotonic() < until and any(running(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if running(pid)]
