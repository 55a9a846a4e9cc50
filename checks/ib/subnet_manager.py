"""ib.subnet_manager: every InfiniBand compute port has a subnet manager."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.finding import Action, Finding
from ..core.registry import CheckContext, check
from .helpers import (
    LINKED,
    NODE,
    compute_ports,
    devices,
    no_compute,
    port_component,
    unknown_finding,
)

# -- ib.subnet_manager ------------------------------------------------------------------


@check("ib.subnet_manager", needs=("infiniband",),
       remedy="LID 0 or SM LID 0 means no subnet manager configured the port: check that "
              "opensm/UFM runs for this rail's subnet (sminfo, the UFM console) and that the "
              "switch port is in the right partition.",
       actions=(Action.INVESTIGATE,))
def subnet_manager(ctx: CheckContext) -> Iterator[Finding]:
    """Every linked InfiniBand compute port has a LID and sees a subnet manager."""
    judged = False
    for dev, port in compute_ports(ctx):
        comp = port_component(dev, port)
        if port.link_layer != "InfiniBand":
            continue
        judged = True
        if port.phys_state != "LinkUp" or port.state not in LINKED:
            yield Finding.skip(comp, "no physical link (see ib.port_state)")
        elif port.lid is None or port.sm_lid is None:
            what = "LID" if port.lid is None else "SM LID"
            yield unknown_finding(comp, what, port.unknown.get("lid") or port.unknown.get("sm_lid"))
        elif port.lid == 0 or port.sm_lid == 0:
            yield Finding.fail(comp, "no subnet manager: LID or SM LID not assigned",
                               {"lid": port.lid, "sm_lid": port.sm_lid, "state": port.state},
                               "non-zero LID and SM LID")
        else:
            yield Finding.passed(comp, "LID and SM LID assigned",
                                 {"lid": port.lid, "sm_lid": port.sm_lid})
    if not judged:
        yield Finding.skip(NODE, "no InfiniBand compute port") if devices(ctx) \
            else no_compute(ctx)
