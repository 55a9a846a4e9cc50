"""Whether an NVML answer that did not come by the deadline is the GPU's trouble or ours.

A GPU that hangs leaves the thread reading it asleep inside a driver call (an ioctl that
never returns). A collector that was starved (a loaded machine, a worker stopped) or given
almost no time (the prolog's budget spent before collection began) leaves the reader
runnable and waiting for a CPU, or not started at all. Both miss the deadline; only the
first is the GPU's fault, and blaming it for the second drains a healthy node.

The kernel accounts each thread's time three ways (``/proc/<pid>/task/<tid>/schedstat``):
on a CPU, waiting on a run queue, and asleep for the rest. The worker notes both, and the
time, as each NVML call begins (``CallClock``), so at the deadline the time of the call a
reader is stuck in splits into CPU, run-queue wait and sleep inside the call: the sleep of
earlier calls and the GIL waits between calls (asleep too, but not the GPU's) never count.
The rule:

* a reader asleep for at least ``HUNG_CALL_S`` inside one NVML call had time of its own
  to get an answer, whatever the load: a GPU that still did not answer is hung
  (``gpu.responsive`` fails it). A healthy GPU answers an NVML query in milliseconds (an
  ioctl into a resident driver), so a quarter of a second asleep in one call is not a
  slow answer; it is also well inside what the default 8 s prolog budget leaves the GPU
  readers on an idle node (8 s less 6 s kept for scontrol, start-up and the 0.5 s P2P
  reserve: about 0.5-1 s), so a hung GPU is still caught there;
* anything less (the call's time went to waiting for a CPU, or the budget ended first),
  a reader that never got into a call, or a worker stopped (SIGSTOP, a debugger) is our
  deadline: an ``error`` naming the budget, never a fail, a reboot or a drain.

nvmlInit runs alone on the worker's main thread, before any other thread, so its time is
that thread's whole life, read by the parent from outside. Where the kernel has no
schedstat, the run-queue wait is unknown and counted as sleep: a hung GPU still fails, a
starved one may be blamed as before.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from ..model.record import fields, record

HUNG_CALL_S = 0.25


@record(frozen=True)
class ThreadTimes:
    """One thread's life so far, as the kernel accounts it, in seconds."""

    state: str  # R running or runnable, S/D asleep, T/t stopped
    alive_s: float
    cpu_s: float
    waited_s: float | None  # on a run queue; None without schedstat

    @property
    def asleep_s(self) -> float:
        return max(0.0, self.alive_s - self.cpu_s - (self.waited_s or 0.0))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _stat(pid: int, tid: int) -> tuple[str, float, float] | None:
    """State, CPU seconds and start (seconds since boot) from proc(5) stat."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        # Fields 3, 14, 15 and 22: state, utime, stime, starttime (fields[0] is field 3).
        return fields[0], (int(fields[11]) + int(fields[12])) / ticks, int(fields[19]) / ticks
    except (OSError, IndexError, ValueError):
        return None


def _sched(pid: int, tid: int) -> tuple[float, float] | None:
    """Seconds on a CPU and waiting on a run queue, from schedstat (None without it)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as f:
            run_ns, wait_ns = (int(v) for v in f.read().split()[:2])
    except (OSError, ValueError):
        return None
    return run_ns / 1e9, wait_ns / 1e9


def thread_times(pid: int, tid: int) -> ThreadTimes | None:
    """Thread ``tid`` of process ``pid`` over its whole life; None when it is gone."""
    stat = _stat(pid, tid)
    if stat is None:
        return None
    state, cpu, start = stat
    sched = _sched(pid, tid)
    alive = max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - start)
    return ThreadTimes(state, round(alive, 3), round(sched[0] if sched else cpu, 3),
                       round(sched[1], 3) if sched else None)


class CallClock:
    """When each thread's current NVML call began, with its CPU and run-queue seconds
    then: what splits a stuck call's time (module doc). One file read per call."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._calls: dict[int, tuple[float, tuple[float, float] | None]] = {}

    def begin(self) -> None:
        tid = threading.get_native_id()
        self._calls[tid] = (time.monotonic(), _sched(self.pid, tid))

    def end(self) -> None:
        self._calls.pop(threading.get_native_id(), None)

    def in_call(self, tid: int) -> ThreadTimes | None:
        """The call thread ``tid`` is in, so far; None when it is in none (or gone)."""
        begun = self._calls.get(tid)
        stat = _stat(self.pid, tid)
        if begun is None or stat is None:
            return None
        started, before = begun
        now = _sched(self.pid, tid)
        cpu, waited = ((now[0] - before[0], now[1] - before[1]) if now and before
                       else (0.0, None))
        return ThreadTimes(stat[0], round(time.monotonic() - started, 3), round(cpu, 3),
                           None if waited is None else round(waited, 3))


def from_dict(data: Any) -> ThreadTimes | None:
    """What ``to_dict`` made, back; None for anything else (a worker's line is data)."""
    if not isinstance(data, dict):
        return None
    try:
        waited = data.get("waited_s")
        return ThreadTimes(str(data["state"]), float(data["alive_s"]), float(data["cpu_s"]),
                           None if waited is None else float(waited))
    except (KeyError, TypeError, ValueError):
        return None


def own_deadline(times: ThreadTimes | None, given_s: float) -> str | None:
    """Why a missed NVML answer is clusterdiag's deadline and not the GPU's, or None when
    the reader slept in NVML long enough for the miss to be the GPU's (module doc)."""
    budget = f"clusterdiag's budget, not the GPU: NVML was given {given_s:.2f} s"
    if times is None:
        return f"{budget} and its reader never got to wait on the GPU (starved)"
    if times.state in ("T", "t"):
        return f"{budget} and the NVML worker was stopped (SIGSTOP or a debugger)"
    if times.asleep_s >= HUNG_CALL_S:
        return None
    waited = "an unknown time" if times.waited_s is None else f"{times.waited_s:.2f} s"
    return (f"{budget}; its reader waited {waited} for a CPU and {times.asleep_s:.2f} s in "
            f"NVML, under the {HUNG_CALL_S:g} s that judges a call hung")
