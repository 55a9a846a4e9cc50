"""nccl.host_limits: the locked-memory, shared-memory and IPC limits a job gets."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from .helpers import NODE, nccl_info, rdma_present, unread

MIB = 1 << 20


@parameters
class HostLimitsParams(Params):
    memlock_fail_mib: int = param(
        1024, ge=0, doc="a locked-memory limit under this (MiB) fails where RDMA devices "
        "are: GPUDirect RDMA registers the job's buffers")
    shm_min_mib: int = param(1024, ge=0, doc="the least /dev/shm in MiB")


@check("nccl.host_limits", needs=("nccl", "pci"), params=HostLimitsParams,
       remedy="memlock: '* soft memlock unlimited' and '* hard memlock unlimited' in "
              "/etc/security/limits.conf and LimitMEMLOCK=infinity for slurmd; /dev/shm: "
              "a larger tmpfs; RemoveIPC=no in /etc/systemd/logind.conf.",
       actions=(Action.FIX_CONFIG,))
def host_limits(ctx: CheckContext) -> Iterator[Finding]:
    """Jobs may lock enough memory, /dev/shm is large enough, logind does not remove IPC.

    The locked-memory limit of this process counts only in ``run`` (launched like a job);
    in the agent or a prolog it is clusterdiag's own, so limits.conf and slurmd's decide.
    """
    limits = nccl_info(ctx.snapshot).limits
    if limits is None:
        yield Finding.error(NODE, "host limits were not collected")
        return
    params = HostLimitsParams.of(ctx)
    fail_bytes = params.memlock_fail_mib * MIB
    problems = 0
    for source in limits.memlock:
        own = source.where == "/proc/self/limits"
        if source.limit_bytes is None or source.limit_bytes < 0 or (own and ctx.mode != "run"):
            continue
        problems += 1
        low = source.limit_bytes < fail_bytes and rdma_present(ctx.snapshot)
        status = Finding.fail if low else Finding.warn
        yield status(NODE, "locked-memory limit for jobs is not unlimited (RDMA registration "
                     "fails)", {source.where: source.detail or source.limit_bytes,
                                "propagation": limits.propagate_limits},
                     "unlimited", Action.FIX_CONFIG)
    shm_min = params.shm_min_mib * MIB
    if limits.shm_bytes is not None and limits.shm_bytes < shm_min:
        problems += 1
        yield Finding.fail(NODE, "/dev/shm is too small for NCCL's shared-memory transport",
                           {"bytes": limits.shm_bytes, "source": limits.shm_source},
                           f">= {shm_min // MIB} MiB", Action.FIX_CONFIG)
    if limits.remove_ipc:
        problems += 1
        yield Finding.warn(NODE, "systemd-logind RemoveIPC=yes can delete NCCL's shared "
                           "memory", limits.remove_ipc_source, "RemoveIPC=no", Action.FIX_CONFIG)
    if limits.unreadable:
        yield unread("host limits unknown: files that set them could not be read",
                      limits.unreadable, {"propagation": limits.propagate_limits})
    elif not problems:
        yield Finding.passed(NODE, "memlock unlimited, /dev/shm large enough, RemoveIPC off",
                             {"shm_bytes": limits.shm_bytes, "shm_source": limits.shm_source,
                              "remove_ipc": limits.remove_ipc_source})
