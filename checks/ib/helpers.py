"""What the ib.* and roce.* checks share: which RDMA devices and compute ports they
judge, how a port is named, and the findings for no compute rail and an unread value."""

from __future__ import annotations

from collections.abc import Iterator

from ...agent.model.ib import IbDevice, IbPort
from ..core.finding import Finding
from ..core.registry import CheckContext

NODE = "node"
LINKED = ("ACTIVE", "INIT", "ARMED", "ACTIVE_DEFER")


def port_component(dev: IbDevice, port: IbPort) -> str:
    return f"{dev.name}/{port.port}"


def unknown_finding(component: str, what: str, reason: str | None) -> Finding:
    """The check could not tell: the value was unreadable or garbage."""
    return Finding.error(component, f"{what} unknown", reason)


def devices(ctx: CheckContext) -> list[IbDevice]:
    return list(ctx.snapshot.infiniband or [])


def compute_ports(ctx: CheckContext) -> Iterator[tuple[IbDevice, IbPort]]:
    for dev in devices(ctx):
        if dev.role == "compute":
            for port in dev.ports:
                yield dev, port


def no_compute(ctx: CheckContext) -> Finding:
    if not devices(ctx):
        return Finding.skip(NODE, "no RDMA devices on this node")
    return Finding.skip(NODE, "no compute HCA on this node (see ib.hca_count)")
