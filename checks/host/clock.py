"""host.clock_sync: the clock is synchronised to NTP."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.finding import Action, Finding
from ..core.registry import CheckContext, check
from .helpers import NODE, host_info


@check("host.clock_sync", needs=("host",),
       remedy="Check the time daemon (chronyc sources, timedatectl timesync-status) and "
              "that the node reaches its NTP servers.",
       actions=(Action.FIX_CONFIG,))
def clock_sync(ctx: CheckContext) -> Iterator[Finding]:
    """The clock is synchronised to NTP, as timedatectl, chronyc or ntpq tell.

    Not synchronised warns rather than fails: a training job does not need synced clocks,
    an unsynchronised clock is usually still close (it lost its server recently), and
    the skew that does break a job (Slurm's munge credentials, minutes) shows up there
    first. It is still worth fixing: logs across nodes stop lining up.
    """
    host = host_info(ctx)
    if isinstance(host, Finding):
        yield host
        return
    clock = host.clock
    if clock is None or clock.method is None:
        if "clock" in host.unknown:
            yield Finding.error(NODE, "clock-sync tool did not answer", host.unknown["clock"])
        else:
            yield Finding.skip(NODE, "no way to tell clock sync (no timedatectl, chronyc "
                                     "or ntpq answered)")
    elif clock.synchronized:
        yield Finding.passed(NODE, "clock synchronised", clock.method)
    else:
        yield Finding.warn(NODE, "clock not synchronised", clock.detail, "synchronised",
                           Action.FIX_CONFIG)
