"""What Slurm tells a prolog, epilog or health check through its environment.

The prolog gets SLURM_JOB_ID, SLURM_JOB_USER, SLURMD_NODENAME and, when the job asked
for GPUs, SLURM_JOB_GPUS / CUDA_VISIBLE_DEVICES as the prolog sees them: outside the job's
cgroup, so the numbers are the physical devices of gres.conf's ``File=/dev/nvidiaN``
(minor numbers, which gpu.processes maps through nvmlDeviceGetMinorNumber, never NVML
indexes), or ``GPU-`` UUIDs. ``NoDevFiles``, MIG UUIDs (a MIG instance's parent GPU is
not in the snapshot) or nothing at all mean the job's GPUs are unknown. gres/shard and
gres/mps jobs share their GPUs with other jobs: Slurm says so with SLURM_SHARDS_ON_NODE
(shard) or CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (mps) where it sets them, and a site can
say so in the config (``checks.gpu.processes.shared``). A HealthCheckProgram gets only
SLURMD_NODENAME (seen under a real slurmd; tests/integration/test_slurm.py runs one).
``hostname`` is wrong on nodes started with ``slurmd -N``, so the node name comes from
SLURMD_NODENAME first.
"""

from __future__ import annotations

import os
import re
import time

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from collections.abc import Mapping


class JobEnv:
    """A plain class, not a dataclass: the prolog reads it on every node for every job
   ."""

    __slots__ = ("gpus", "job_id", "node", "shared", "start_time", "user")

    def __init__(self, job_id: str | None, user: str | None, node: str | None,
                 gpus: tuple[str, ...] | None, start_time: float | None,
                 shared: bool = False) -> None:
        self.job_id = job_id
        self.user = user
        self.node = node
        self.gpus = gpus  # minor numbers or GPU- UUIDs; None: unknown
        self.start_time = start_time  # epoch, when the environment says
        self.shared = shared  # gres/shard or gres/mps: other jobs' processes are expected

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"JobEnv({fields})"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> JobEnv:
        env = os.environ if environ is None else environ
        return cls(
            job_id=env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or None,
            user=env.get("SLURM_JOB_USER") or None,
            node=env.get("SLURMD_NODENAME") or None,
            gpus=_gpu_list(env.get("SLURM_JOB_GPUS")) or _gpu_list(
                env.get("CUDA_VISIBLE_DEVICES")),
            start_time=_epoch(env.get("SLURM_JOB_START_TIME")),
            shared=bool(env.get("SLURM_SHARDS_ON_NODE")
                        or env.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")),
        )


# Compiled on first use (re's cache): most jobs name no GPU UUID, and the prolog's start
# counts.
_UUID = r"GPU-[0-9A-Fa-f]{8}(-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}"


def _gpu_list(value: str | None) -> tuple[str, ...] | None:
    """``0,1,3`` or ``GPU-<uuid>,...``; anything else (MIG UUIDs, NoDevFiles) is unknown."""
    if not value:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items or not all((v.isascii() and v.isdigit()) or re.fullmatch(_UUID, v)
                            for v in items):  # not "²"
        return None
    return tuple(dict.fromkeys(items))


def _epoch(value: str | None) -> float | None:
    if not value:
        return None
    try:
        stamp = float(value)
    except ValueError:
        return None
    return stamp if 0 < stamp <= time.time() + 60 else None


def seconds_since_process_start() -> float:
    """How long ago this process was exec'd: the budget counts the interpreter's start
    and imports too, which Slurm's timeout also counts. 0 when /proc cannot tell."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(0.0, uptime - started)
