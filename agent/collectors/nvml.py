"""The NVML source, collected in a forked worker so that a hung GPU cannot hang us.

NVML calls can block forever (a GPU off the bus leaves the caller in uninterruptible
sleep). The worker is forked before the other sources start, closes every inherited
descriptor except its result pipe (so it never holds Slurm's stdout/stderr open), reads
each GPU in its own thread and streams one JSON line per finished GPU. The parent reads
until the deadline, then SIGKILLs the worker and names the GPUs that never answered,
each with whether the miss was the GPU's hang or our own deadline (nvml_budget.py).
The worker also reads the files that answer some of NVML's questions for it (each GPU's
identity in the driver's procfs, its current PCIe link in sysfs: gpu_files.py), so a
driver blocking in them is covered by the same deadline.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import select
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.lazy_re import LazyPattern
from ..model.gpu import Gpu, NvmlInfo
from ..model.record import field, record
from ..model.serde import from_jsonable, to_jsonable
from ..model.snapshot import SourceStats
from ..read import nvml_library
from ..read.sources import SourceEnv, real_nvml
from ..read.sysfs import read_text
from ..read.worker import fork_worker, stop_worker
from .nvml_budget import ThreadTimes, from_dict, own_deadline, thread_times
from .nvml_read import (
    CountingNvml,
    GpuReader,
    NodeFacts,
    checked,
    read_bw_mode,
    read_p2p,
    read_system,
    resolve_remotes,
)

if TYPE_CHECKING:
    from .nvml_api import NvmlApi

# The check that reports the NVLink5 FEC bins: they are read only when it is planned.
FEC_HISTORY_CHECK = "nvlink.fec_history"
_P2P_RESERVE_S = 0.5  # time kept before the deadline to read P2P among answering GPUs


def read_all(nv_module: NvmlApi, emit: Callable[[dict[str, Any]], None],
             deadline: float | None = None, root: Path | None = None,
             fec_history: bool = False) -> None:
    """Everything NVML says about this node, streamed through ``emit`` as it arrives.

    A GPU still busy shortly before ``deadline`` is left to hang; the pairs among the GPUs
    that answered still get their P2P status. ``root`` is the node's filesystem: each
    GPU's identity and current PCIe link are read from its files there where they say
    what NVML would (gpu_files.py), and when nvmlInit fails its GPU device files are
    tried: one we may not open is our confinement, not the GPU. Without ``root`` NVML is
    asked everything. ``fec_history`` adds each NVLink5 link's FEC bins to the per-link
    batch."""
    nv = CountingNvml(nv_module)
    info = NvmlInfo()
    ok = read_system(nv, info)
    if not ok and info.library_error != "NoPermission" and root is not None:
        denied = denied_devices(root / "dev")
        if denied:
            info.errors["devices"] = denied
    emit({"t": "system", "data": to_jsonable(info)})
    if not ok or not info.device_count:
        emit({"t": "end", "calls": nv.calls})
        return
    lock = threading.Lock()
    facts = NodeFacts()  # what one GPU's answer says for all of them
    readers = [GpuReader(nv, i, fec_history, facts, root) for i in range(info.device_count)]

    def work(reader: GpuReader) -> None:
        try:
            gpu = reader.read()
            resolve_remotes(reader)
        except Exception as exc:  # noqa: BLE001 - our bug on one GPU must not lose the rest
            gpu = reader.gpu
            gpu.errors["reader"] = f"{type(exc).__name__}: {exc}"[:200]
        with lock:
            emit({"t": "gpu", "data": to_jsonable(checked(gpu))})

    threads = [threading.Thread(target=work, args=(r,), daemon=True) for r in readers]
    for t in threads:
        t.start()
    for t in threads:
        left = None if deadline is None else max(0.0, deadline - _P2P_RESERVE_S - time.monotonic())
        t.join(left)
    answered = [r for r, t in zip(readers, threads, strict=False) if not t.is_alive()]
    for reader, thread in zip(readers, threads, strict=True):
        if thread.is_alive():  # how its time went: the GPU's hang or our deadline
            times = nv.clock.in_call(thread.native_id) if thread.native_id else None
            emit({"t": "stuck", "gpu": reader.gpu.index,
                  "times": times.to_dict() if times else None})
    bw_mode = read_bw_mode(nv, answered)
    if bw_mode is not None:
        emit({"t": "nvlink_bw_mode", **bw_mode})
    emit({"t": "p2p", "data": read_p2p(nv, answered)})
    emit({"t": "end", "calls": nv.calls})


def readable(fd: int, timeout_s: float) -> bool:
    """Whether ``fd`` has data or EOF within ``timeout_s``. poll(2), not select(2):
    select cannot watch a descriptor numbered FD_SETSIZE (1,024) or more (select(2),
    DESCRIPTION, "WARNING"; Python raises ValueError), and the agent serving thousands of
    connections hands out higher ones; poll takes any descriptor. Its timeout is in
    milliseconds, rounded up so that a short wait never becomes a busy loop."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(math.ceil(timeout_s * 1000)))


@record
class PendingNvml:
    """A running worker; ``result`` collects what it said by the deadline."""
    pid: int
    fd: int
    started: float
    lines: list[dict[str, Any]] = field(default_factory=list)
    given_s: float = 0.0  # what NVML had, start to deadline
    silent: ThreadTimes | None = None  # the worker's main thread when it said nothing

    def result(self, stats: SourceStats, deadline: float) -> NvmlInfo:
        if self.pid == NO_WORKER:
            stats.seconds = round(time.monotonic() - self.started, 4)
            return self._assemble(stats, finished=True)
        buffer = b""
        eof = False
        while not eof:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not readable(self.fd, left):
                break
            chunk = os.read(self.fd, 65536)
            if not chunk:
                eof = True
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            self.lines.extend(json.loads(line) for line in complete if line.strip())
        os.close(self.fd)
        self.given_s = max(0.0, deadline - self.started)
        if not eof and not self.lines:  # still in nvmlInit, or never got a CPU to reach it
            self.silent = thread_times(self.pid, self.pid)
        stop_worker(self.pid, kill=not eof)
        stats.seconds = round(time.monotonic() - self.started, 4)
        return self._assemble(stats, finished=eof)

    def _assemble(self, stats: SourceStats, finished: bool) -> NvmlInfo:
        info = NvmlInfo()
        gpus: dict[int, Gpu] = {}
        stuck: dict[int, ThreadTimes | None] = {}
        for msg in self.lines:
            kind = msg.get("t")
            if kind == "system":
                info = from_jsonable(NvmlInfo, msg["data"])
            elif kind == "gpu":
                gpu = from_jsonable(Gpu, msg["data"])
                gpus[gpu.index] = gpu
            elif kind == "p2p":
                info.p2p_nvlink = dict(msg["data"])
            elif kind == "nvlink_bw_mode":
                info.nvlink_bw_mode = msg["mode"]
                if msg["error"]:
                    info.errors["nvlink_bw_mode"] = str(msg["error"])
            elif kind == "stuck":
                stuck[int(msg["gpu"])] = from_dict(msg.get("times"))
            elif kind == "end":
                stats.calls = int(msg["calls"])
            elif kind == "crash":
                stats.status = "error"
                stats.error = info.errors["worker"] = str(msg["error"])
        if not finished and not self.lines:
            ours = own_deadline(self.silent, self.given_s)
            info.errors["init"] = f"NVML did not answer ({ours or 'nvmlInit hung'})"
            if ours:
                info.errors["deadline"] = ours
        info.unanswered = sorted(set(range(info.device_count or 0)) - set(gpus))
        if info.unanswered or not finished:
            stats.status = "timeout"
            stats.error = ("no answer from GPU(s) " + ",".join(map(str, info.unanswered))
                           if info.unanswered else "NVML did not finish in time")
        for index in info.unanswered:
            gpus[index] = Gpu(index=index, responsive=False, lost="timeout")
            ours = own_deadline(stuck.get(index), self.given_s)
            if ours:
                gpus[index].errors["deadline"] = ours
        info.gpus = [gpus[i] for i in sorted(gpus)]
        return info


NO_WORKER = 0  # PendingNvml.pid when there was nothing for a worker to ask


def _library_missing(env: SourceEnv) -> PendingNvml | None:
    """What the worker would say when the real pynvml cannot load NVML's library: its
    ``nvmlInit`` failed, nothing else was asked. Said without importing pynvml (about
    four interpreter starts) or forking: agent/read/nvml_library.py makes pynvml's dlopen."""
    if env.nvml is not real_nvml or not nvml_library.missing():
        return None
    info = NvmlInfo(library_error=nvml_library.NOT_FOUND,
                    library_message=nvml_library.NOT_FOUND_MESSAGE)
    return PendingNvml(pid=NO_WORKER, fd=-1, started=time.monotonic(),
                       lines=[{"t": "system", "data": to_jsonable(info)},
                              {"t": "end", "calls": 1}])  # the nvmlInit that failed


def start(env: SourceEnv, deadline: float | None = None) -> PendingNvml:
    """Fork the worker. Call before starting threads: the child must not inherit locks."""
    pending = _library_missing(env)
    if pending is not None:
        return pending
    module = env.nvml()  # imported in the parent, so the child imports nothing
    fec = FEC_HISTORY_CHECK in env.params  # planned at level full only
    pid, read_fd = fork_worker(lambda emit: read_all(module, emit, deadline, env.root, fec))
    return PendingNvml(pid=pid, fd=read_fd, started=time.monotonic())


def collect(env: SourceEnv, stats: SourceStats, deadline: float) -> NvmlInfo:
    info = start(env, deadline).result(stats, deadline)
    attribute_processes(info, env)
    return info


_GPU_NODE = LazyPattern(r"nvidia(?:ctl|\d+)")
_DENIED_ERRNOS = (errno.EPERM, errno.EACCES)


def denied_devices(dev: Path) -> str | None:
    """The first GPU device file that exists and will not open for us, with the reason.

    A device cgroup that denies the GPUs (systemd's DeviceAllow=, a container runtime after
    ``systemctl daemon-reload``) makes nvmlInit answer "Unknown Error", not NO_PERMISSION
    (NVIDIA/nvidia-container-toolkit#48): without this the node would be failed for a
    reboot over our own confinement. open() itself says EPERM (the cgroup check, made
    before the driver is called) or EACCES (the file's mode). A device that does open
    reaches the driver, which may block on a broken GPU: this runs in the NVML worker,
    whose deadline covers it."""
    try:
        names = sorted(n for n in os.listdir(dev) if _GPU_NODE.fullmatch(n))
    except OSError:
        return None
    for name in names:
        try:
            os.close(os.open(dev / name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC))
        except OSError as exc:
            if exc.errno in _DENIED_ERRNOS:
                return f"/dev/{name}: {os.strerror(exc.errno)}"
    return None


_JOB_CGROUP = LazyPattern(r"/job_(\d+)(?:/|$)", re.MULTILINE)


def attribute_processes(info: NvmlInfo, env: SourceEnv) -> None:
    """Which Slurm job each GPU process belongs to, from its /proc/<pid>/cgroup: the
    job's cgroup (``.../job_4711/step_0/...``) on cgroup v1 and v2 alike. cgroup v2 has no
    device list, so the GPU a job may use cannot be read there; the process's job can."""
    for gpu in info.gpus:
        for process in gpu.processes or []:
            text, _ = read_text(env.root / "proc" / str(process.pid) / "cgroup", limit=8192)
            match = _JOB_CGROUP.search(text) if text is not None else None
            process.slurm_job = None if text is None else match.group(1) if match else ""
