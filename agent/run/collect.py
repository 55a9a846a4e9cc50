"""Collecting a Snapshot: each needed source once, in parallel, each under its deadline.

The table below is the one list of sources (gpud's all.go, not directory scanning).
A source's collector is imported only when a run needs that source, before any thread
starts: the prolog re-running one PCI check must not pay for the kernel log's patterns
or the InfiniBand readers. A source that raises becomes ``status: error`` with the
one-line reason; one that does not answer by its deadline becomes ``status: timeout``
and the run goes on without it.
NVML is forked before any thread starts (see collectors/nvml.py).
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..base.boot import boot_id
from ..model.record import record
from ..model.snapshot import Snapshot, SourceStats
from ..read.sources import SourceEnv


@record(frozen=True)
class SourceSpec:
    """One source of a snapshot: its collector and the deadline it gets, so one slow
    source costs its own data, never the others'."""

    name: str
    collect: Callable[[SourceEnv, SourceStats, float], Any]
    deadline_s: float
    counters: bool  # holds counters that rate checks compare between two samples


COLLECTORS = f"{__package__.rpartition('.')[0]}.collectors"
# Each source's collector module under agent/collectors/.
MODULES = {"host": "host", "pci": "pci", "nvml": "nvml", "kernel_log": "kernel",
           "infiniband": "ib", "nccl": "nccl", "allreduce": "allreduce"}


def collector(name: str) -> Any:
    """The collector module of source ``name``, imported on first use."""
    return importlib.import_module(f"{COLLECTORS}.{MODULES[name]}")


def _collect(name: str) -> Callable[[SourceEnv, SourceStats, float], Any]:
    def collect(env: SourceEnv, stats: SourceStats, deadline: float) -> Any:
        return collector(name).collect(env, stats, deadline)
    return collect


SOURCES: dict[str, SourceSpec] = {
    "host": SourceSpec("host", _collect("host"), 4.0, counters=True),
    "pci": SourceSpec("pci", _collect("pci"), 3.0, counters=True),
    "nvml": SourceSpec("nvml", _collect("nvml"), 6.0, counters=True),
    "kernel_log": SourceSpec("kernel_log", _collect("kernel_log"), 3.0, counters=False),
    "infiniband": SourceSpec("infiniband", _collect("infiniband"), 3.0, counters=True),
    "nccl": SourceSpec("nccl", _collect("nccl"), 5.0, counters=False),
    # Runs all_reduce_perf, and only when nccl.allreduce is planned (--level full).
    "allreduce": SourceSpec("allreduce", _collect("allreduce"), 120.0, counters=False),
}


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def collect_snapshot(env: SourceEnv, names: Iterable[str], deadline: float,
                     level: str = "quick") -> Snapshot:
    """Collect ``names`` into a Snapshot; never waits past ``deadline`` (monotonic)."""
    wanted = [n for n in SOURCES if n in set(names)]
    for name in wanted:  # here, not in the sources' threads: imports take a global lock
        if name in MODULES:
            collector(name)
    nvml = collector("nvml") if "nvml" in wanted else None
    for hook in env.before_sample:
        hook()
    snap = Snapshot(node=env.node, taken_at=time.time(), simulated=env.simulated, level=level,
                    boot_id=boot_id(), boot_clock_s=time.clock_gettime(time.CLOCK_BOOTTIME))
    results: dict[str, Any] = {}
    stats = {name: SourceStats() for name in wanted}
    nvml_deadline = min(deadline, time.monotonic() + SOURCES["nvml"].deadline_s)
    pending = None
    if nvml is not None:
        try:
            pending = nvml.start(env, nvml_deadline)
        except OSError as exc:  # no pipe or no fork (out of descriptors, of processes)
            stats["nvml"].status, stats["nvml"].error = "error", one_line(exc)

    def run(spec: SourceSpec) -> None:
        started = time.monotonic()
        try:
            results[spec.name] = spec.collect(env, stats[spec.name],
                                              min(deadline, started + spec.deadline_s))
        except Exception as exc:  # noqa: BLE001 - a broken source is data, not a crash
            stats[spec.name].status = "error"
            stats[spec.name].error = one_line(exc)
        stats[spec.name].seconds = round(time.monotonic() - started, 4)

    threads = {name: threading.Thread(target=run, args=(SOURCES[name],), daemon=True,
                                      name=f"source-{name}")
               for name in wanted if name != "nvml"}
    starts = {}
    for name, thread in threads.items():
        starts[name] = time.monotonic()
        thread.start()
    if nvml is not None and pending is not None:
        results["nvml"] = pending.result(stats["nvml"], nvml_deadline)
        nvml.attribute_processes(results["nvml"], env)
    for name, thread in threads.items():
        limit = min(deadline, starts[name] + SOURCES[name].deadline_s)
        thread.join(max(0.0, limit - time.monotonic()))
        if thread.is_alive():
            stats[name].status = "timeout"
            stats[name].error = f"no answer within {SOURCES[name].deadline_s:g} s"
            stats[name].seconds = round(time.monotonic() - starts[name], 4)
    for name in wanted:
        if stats[name].status == "ok" or (name == "nvml" and pending is not None):
            setattr(snap, name, results.get(name))
    snap.sources = stats
    return snap
