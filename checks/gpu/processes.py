"""gpu.processes: no compute process left on the job's GPUs, judged by the job that
owns it (its cgroup) within a Slurm job."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..core.common import NODE, gpu_component
from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from .helpers import answering_gpus, missing


@parameters
class ProcessesParams(Params):
    job_gpus: str | tuple[str | int, ...] | None = param(
        None, doc="the job's GPUs (the prolog and epilog fill it from SLURM_JOB_GPUS or "
        "CUDA_VISIBLE_DEVICES): minor numbers of /dev/nvidiaN as gres.conf File= names "
        "them (matched through nvmlDeviceGetMinorNumber, never as NVML indexes) or GPU- "
        "UUIDs, a list or \"0,1,2\"; null: every GPU, or unknown within a job")
    job_id: str | int | None = param(
        None, doc="the Slurm job being started or ended; null outside Slurm (run). With a "
        "job, each process is attributed by its cgroup")
    shared: bool = param(
        False, doc="gres/shard or gres/mps: the job's GPUs are shared with other jobs, "
        "whose processes are expected there (the prolog sets it from Slurm's variables)")
    fail_modes: tuple[str, ...] = param(
        ("prolog", "epilog", "run"), doc="modes where a leftover process fails: before a "
        "job (prolog, run) and after it (epilog). The agent and healthcheck run beside "
        "jobs, so there it is noted only")


@check("gpu.processes", needs=("nvml",), params=ProcessesParams,
       remedy="A process still holds the GPU: find it (nvidia-smi, the pid's /proc entry), "
              "end it or let the epilog kill the previous job's leftovers; drain the node "
              "until the GPU is free (a zombie holding GPU memory may need a reboot).",
       actions=(Action.DRAIN, Action.FIX_CONFIG))
def processes(ctx: CheckContext) -> Iterator[Finding]:
    """No compute process is left on the job's GPUs (all GPUs unless ``job_gpus`` is set).

    Within a Slurm job (``job_id``) each process is judged by whose it is, from its
    cgroup: on the job's own GPUs, when Slurm gave them to this job alone, any process
    but the job's is a leftover (the GPU is not free) and, at the epilog, the job's own
    are too. Where the GPUs are shared (gres/shard, gres/mps) or unknown (a CPU-only job,
    NoDevFiles, MIG UUIDs), other jobs' processes are theirs and never judged, nor those
    whose cgroup cannot be read: only the job's own leftovers fail at the epilog, and,
    where the GPUs are unknown and not shared, a process in no job at all (nobody's
    leftover). The MPS server is never a leftover. Outside a job every process on a
    judged GPU counts.
    """
    params = ProcessesParams.of(ctx)
    job = None if params.job_id is None else str(params.job_id)
    gpus, skips = answering_gpus(ctx)
    wanted = _job_gpus(params.job_gpus, gpus)
    if isinstance(wanted, Finding):
        yield wanted
        return
    if isinstance(wanted, str):
        yield Finding.warn(NODE, "job_gpus names a GPU NVML does not enumerate", wanted,
                           sorted(g.minor_number for g in gpus if g.minor_number is not None),
                           Action.FIX_CONFIG)
        wanted = None  # unknown: judge no other job's processes
    if wanted is not None and not wanted:
        yield Finding.skip(NODE, "the job has no GPU")
        return
    yield from (f for f in skips if wanted is None or f.component == NODE
                or int(f.component[3:]) in wanted)
    judge = ctx.mode in params.fail_modes
    shared = params.shared
    for gpu in gpus:
        theirs = wanted is None or gpu.index in wanted
        if job is None and not theirs:
            continue
        comp = gpu_component(gpu)
        if gpu.processes is None:
            if theirs:
                yield missing(gpu, "GPU process list", "processes")
            continue
        exclusive = theirs and wanted is not None and not shared
        judged = [p for p in gpu.processes if p.name != MPS_SERVER and _counts(
            p.slurm_job, job, ctx.mode, exclusive=exclusive,
            nobodys=wanted is None and not shared)]
        if judged and judge:
            yield Finding.fail(comp, "compute processes left on the GPU", _observed(judged), [],
                               Action.DRAIN)
        elif gpu.processes and (judged or job is None):
            yield Finding.passed(comp, f"compute processes on the GPU (not judged in "
                                 f"{ctx.mode} mode)", _observed(gpu.processes))
        elif gpu.processes:
            yield Finding.passed(comp, "only other jobs' processes on the GPU (not judged)",
                                 _observed(gpu.processes))
        elif theirs:
            yield Finding.passed(comp, "no compute process on the GPU", [], [])


MPS_SERVER = "nvidia-cuda-mps-server"


def _counts(owner: str | None, job: str | None, mode: str, *, exclusive: bool,
            nobodys: bool) -> bool:
    """Whether a process on a GPU is a leftover: outside a job, every one; within one,
    the job's own at its end, on a GPU the job holds alone everyone else's too, and
    where ``nobodys``, one in no job's cgroup."""
    if job is None:
        return True
    if owner == job:
        return mode == "epilog"
    return exclusive or (nobodys and owner == "")


def _observed(procs: list[Any]) -> list[dict[str, Any]]:
    return [{"pid": p.pid, "name": p.name, "used_memory_bytes": p.used_memory_bytes,
             "slurm_job": p.slurm_job} for p in procs[:10]]


def _job_gpus(value: str | tuple[str | int, ...] | None, gpus: list[Any]
              ) -> set[int] | str | Finding | None:
    """The NVML indexes of the GPUs ``value`` names (minor numbers or UUIDs); None when
    it names none; the first name no GPU answers to (by minor number or UUID) when one
    cannot be placed."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    by_minor = {g.minor_number: g.index for g in gpus if g.minor_number is not None}
    by_uuid = {g.uuid.lower(): g.index for g in gpus if isinstance(g.uuid, str)}
    found: set[int] = set()
    for item in (str(v).strip() for v in items):
        if item.isascii() and item.isdigit():
            index = by_minor.get(int(item))
        elif item.lower().startswith("gpu-"):
            index = by_uuid.get(item.lower())
        elif not item:
            continue
        else:
            return Finding.error(NODE, "checks.gpu.processes.job_gpus must be minor numbers "
                                 "or GPU UUIDs", value)
        if index is None:
            return item
        found.add(index)
    return found
