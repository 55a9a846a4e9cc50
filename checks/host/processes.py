"""host.dstate_processes: processes stuck in uninterruptible sleep across two samples."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from .helpers import NODE, host_info, since_previous


@parameters
class DstateParams(Params):
    min_stuck_s: float = param(
        2.0, ge=0, doc="the least time between the samples for a process in D state in "
        "both to count as stuck, in seconds")
    fail_count: int = param(3, ge=1, doc="stuck processes that fail (fewer warn)")
    ignore: tuple[str, ...] = param(
        (), doc="process names that idle in D state by design on some kernels or drivers")


@check("host.dstate_processes", needs=("host",), rate=True, params=DstateParams,
       remedy="See what the processes wait on (cat /proc/PID/stack, wchan): a hung GPU "
              "driver (nvidia-smi in D state), a dead NFS/Lustre server or a failing disk. "
              "Processes in D state cannot be killed; a reboot clears them.",
       actions=(Action.INVESTIGATE,))
def dstate_processes(ctx: CheckContext) -> Iterator[Finding]:
    """Processes in uninterruptible sleep (D state) in two samples ``min_stuck_s`` apart.

    A process is the same one when both its pid and its start time match. Disk I/O puts
    processes in D state for milliseconds, so being there in both samples of a one-shot
    run (3 s apart by default) already means a wait of seconds: a warning. The default of
    2 s stays below that interval so the check works in one-shot runs. ``fail_count``
    stuck processes fail: at job start a node should be idle, and several stuck at once
    mean a shared resource (a driver, a filesystem) does not answer. ``ignore`` lists
    process names that idle in D state by design on some kernels or drivers.
    """
    host = host_info(ctx)
    params = DstateParams.of(ctx)
    elapsed = since_previous(ctx)
    before = ctx.previous.host if ctx.previous is not None else None
    if isinstance(host, Finding):
        yield host
    elif elapsed is None or before is None:
        yield Finding.skip(NODE, "needs an earlier sample of this node")
    elif elapsed < params.min_stuck_s:
        yield Finding.skip(NODE, "samples too close together to call a process stuck")
    elif "dstate" in host.unknown or "dstate" in before.unknown:
        yield Finding.error(NODE, "process list unreadable",
                            host.unknown.get("dstate") or before.unknown.get("dstate"))
    else:
        earlier = {(p.pid, p.start_ticks) for p in before.dstate}
        stuck = [{"pid": p.pid, "name": p.name, "wchan": p.wchan} for p in host.dstate
                 if (p.pid, p.start_ticks) in earlier and p.name not in params.ignore]
        expected = f"< {params.fail_count} stuck for {round(elapsed, 1)} s"
        if len(stuck) >= params.fail_count:
            yield Finding.fail(NODE, "processes stuck in uninterruptible sleep", stuck,
                               expected)
        elif stuck:
            yield Finding.warn(NODE, "process stuck in uninterruptible sleep", stuck,
                               expected)
        else:
            yield Finding.passed(NODE, "no process stuck in uninterruptible sleep", [],
                                 expected)
