"""What the host.* checks share: the host facts of the snapshot (or the error
finding saying why there are none) and the time between two samples."""

from __future__ import annotations

from ...agent.model.host import HostInfo
from ..core.finding import Finding
from ..core.registry import CheckContext

GIB = 1 << 30
NODE = "node"


def host_info(ctx: CheckContext) -> HostInfo | Finding:
    host = ctx.snapshot.host
    if host is None:
        return Finding.error(NODE, "host facts were not collected",
                             ctx.snapshot.sources.get("host"))
    return host


def since_previous(ctx: CheckContext) -> float | None:
    previous = ctx.previous
    return None if previous is None else ctx.snapshot.taken_at - previous.taken_at
