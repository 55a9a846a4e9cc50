"""nccl.host_limits (checks/nccl/limits.py)."""

from __future__ import annotations

from clusterdiag.agent.model.nccl import HostLimits, MemlockSource, NcclInfo
from clusterdiag.checks.core.finding import Status
from tests.checks.nccl.factory import judge, statuses


def _limits(*memlock: MemlockSource, shm: int = 32 << 30, remove_ipc: bool = False
            ) -> NcclInfo:
    return NcclInfo(limits=HostLimits(memlock=list(memlock), shm_bytes=shm,
                                      remove_ipc=remove_ipc))


def test_host_limits_verdicts() -> None:
    own_low = MemlockSource("/proc/self/limits", 8 << 20)
    assert statuses(judge("nccl.host_limits", _limits(own_low))) == [Status.FAIL]
    # in the agent the process limit is clusterdiag's own, not the jobs'
    assert statuses(judge("nccl.host_limits", _limits(own_low), mode="agent")) == [Status.PASS]
    conf = MemlockSource("/etc/security/limits.conf:3", 64 << 30, "* hard memlock 67108864")
    assert statuses(judge("nccl.host_limits", _limits(conf), mode="agent")) == [Status.WARN]
    assert statuses(judge("nccl.host_limits", _limits(shm=64 << 20))) == [Status.FAIL]
    assert statuses(judge("nccl.host_limits", _limits(remove_ipc=True))) == [Status.WARN]
    unlimited = MemlockSource("/proc/self/limits", -1)
    assert statuses(judge("nccl.host_limits", _limits(unlimited))) == [Status.PASS]
