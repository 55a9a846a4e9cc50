"""Each port's link: ib.port_state (up and active), ib.rate (the expected speed) and
ib.link_layer (InfiniBand or Ethernet, as the profile says)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from ...agent.model.ib import IbDevice, IbPort
from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
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

CONNECTX8 = "MT4131"
# Logical states of a port whose physical link is up but that the subnet manager has not
# activated (IBA PortInfo PortState 2 INIT, 3 ARMED).
_NOT_ACTIVATED = ("INIT", "ARMED")


# -- ib.port_state ----------------------------------------------------------------------


def _compute_state(dev: IbDevice, port: IbPort) -> Finding:
    comp = port_component(dev, port)
    if port.state is None or port.phys_state is None:
        what = "port state" if port.state is None else "physical port state"
        return unknown_finding(comp, what, port.unknown.get("state")
                               or port.unknown.get("phys_state"))
    observed = f"{port.state}/{port.phys_state}"
    if port.link_layer == "Ethernet" and port.netdev_operstate not in (None, "up"):
        return Finding.fail(comp, "RoCE compute port's netdev is not up",
                            {"netdev": port.netdev, "operstate": port.netdev_operstate},
                            "up", Action.INVESTIGATE)
    if port.state == "ACTIVE" and port.phys_state == "LinkUp":
        return Finding.passed(comp, "port active, link up", observed)
    if port.phys_state == "LinkUp" and port.state in _NOT_ACTIVATED:
        # The cable and the switch port are fine; the subnet manager never took the port
        # to ACTIVE. NCCL opens only ACTIVE ports, so the rail is unusable whatever its LID.
        observed_sm = {"state": port.state, "phys_state": port.phys_state, "lid": port.lid,
                       "sm_lid": port.sm_lid}
        why = "no subnet manager has configured it" if not port.lid or not port.sm_lid \
            else "the subnet manager assigned a LID but did not activate it"
        return Finding.fail(comp, f"port {port.state} with link up: {why}", observed_sm,
                            "ACTIVE/LinkUp", Action.INVESTIGATE)
    if port.phys_state == "LinkUp" and port.state in LINKED:
        return Finding.skip(comp, "link up, activation deferred (see ib.subnet_manager)")
    if port.phys_state == "Polling":
        return Finding.fail(comp, "no link partner (Polling): cable or switch port",
                            observed, "ACTIVE/LinkUp", Action.RESEAT_CABLE)
    return Finding.fail(comp, f"port {port.state}, physical {port.phys_state}", observed,
                        "ACTIVE/LinkUp", Action.INVESTIGATE)


def _other_state(dev: IbDevice, port: IbPort) -> Finding:
    comp = port_component(dev, port)
    netdev_down = port.link_layer == "Ethernet" and port.netdev_operstate not in (None, "up")
    if netdev_down:
        return Finding.warn(comp, f"{dev.role} RoCE port down: netdev not up",
                            {"netdev": port.netdev, "operstate": port.netdev_operstate,
                             "state": port.state}, "up")
    if port.state not in (None, "ACTIVE"):
        return Finding.warn(comp, f"{dev.role} port not active", port.state, "ACTIVE")
    return Finding.passed(comp, f"{dev.role} port up", port.state)


@parameters
class PortStateParams(Params):
    noncompute: Literal["warn", "ignore"] = param(
        "warn", doc="storage and management ports that are not up: warn, or ignore")
    ignore_hcas: tuple[str, ...] = param(
        (), doc="RDMA devices (mlx5_4) whose ports are unused on purpose: not judged")


@check("ib.port_state", needs=("infiniband",), params=PortStateParams,
       remedy="Polling means no link partner: reseat or replace the cable, check the switch "
              "port. INIT or ARMED with the link up: the subnet manager has not activated "
              "the port (is opensm/UFM running for this rail, does it log the port, "
              "`sminfo`, `ibportstate`). Disabled/Down: see whether the switch or the SM "
              "disabled the port "
              "(ibportstate, the switch log). A RoCE port is down when its netdev is: "
              "`ip link set DEV up` and check the network configuration. Ports that are "
              "unused on purpose can be listed in ignore_hcas.",
       actions=(Action.RESEAT_CABLE, Action.INVESTIGATE))
def port_state(ctx: CheckContext) -> Iterator[Finding]:
    """Every compute port is ACTIVE with its physical link up; other ports up (warn).

    A compute port in INIT or ARMED fails whatever its LID: with no LID the subnet
    manager never configured it (ib.subnet_manager says so too), with one it configured
    it and stopped short of ACTIVE; either way NCCL cannot use the rail.
    """
    params = PortStateParams.of(ctx)
    ignore = set(params.ignore_hcas)
    judged = False
    for dev in devices(ctx):
        if dev.name in ignore:
            continue
        for port in dev.ports:
            if dev.role == "compute":
                judged = True
                yield _compute_state(dev, port)
            elif params.noncompute != "ignore":
                judged = True
                yield _other_state(dev, port)
    if not judged:
        yield no_compute(ctx)


# -- ib.rate ----------------------------------------------------------------------------


def _rate(dev: IbDevice, port: IbPort, expected: float) -> Finding:
    comp = port_component(dev, port)
    if port.rate_gbps is None:
        return unknown_finding(comp, "port rate", port.unknown.get("rate"))
    text = f"{port.rate_gbps:g} Gb/sec ({port.width} {port.speed})"
    if dev.hca_type == CONNECTX8 and port.speed == "SDR":
        # Kernels before "IB/core: Add support for XDR link speed" print XDR as SDR.
        return Finding.warn(comp, "ConnectX-8 reports SDR: kernel too old to name XDR, "
                                  "rate unknown", text, f">= {expected:g} Gb/s",
                            Action.FIX_CONFIG)
    if port.rate_gbps >= expected:
        return Finding.passed(comp, "rate as expected", text, f">= {expected:g} Gb/s")
    lower = "width" if port.width and port.width != "4X" else "speed"
    return Finding.fail(comp, f"link trained at a lower {lower}", text, f">= {expected:g} Gb/s",
                        Action.RESEAT_CABLE)


@check("ib.rate", needs=("infiniband",),
       remedy="A port below its rate trained down: reseat or replace the cable or "
              "transceiver, check the switch port, and watch ib.error_rate. A ConnectX-8 "
              "that shows SDR needs a kernel that names XDR (6.7 or later).",
       actions=(Action.RESEAT_CABLE, Action.FIX_CONFIG))
def rate(ctx: CheckContext) -> Iterator[Finding]:
    """Every active compute port runs at the platform's rate (400 Gb/s NDR on DGX H100)."""
    expected = ctx.profile.hca_rate_gbps
    if expected is None:
        yield Finding.skip(NODE, "profile states no HCA rate")
        return
    ports = list(compute_ports(ctx))
    for dev, port in ports:
        if port.state != "ACTIVE":
            yield Finding.skip(port_component(dev, port), "port not active (see ib.port_state)")
        else:
            yield _rate(dev, port, float(expected))
    if not ports:
        yield no_compute(ctx)


# -- ib.link_layer ----------------------------------------------------------------------


@check("ib.link_layer", needs=("infiniband",),
       remedy="A compute port on the wrong link layer was configured so: set the port type "
              "with mlxconfig (LINK_TYPE_P1=1 for InfiniBand, 2 for Ethernet) and reboot, "
              "or fix the profile if this cluster's compute fabric is RoCE.",
       actions=(Action.FIX_CONFIG,))
def link_layer(ctx: CheckContext) -> Iterator[Finding]:
    """Every compute port runs the platform's link layer (InfiniBand on DGX/GB200)."""
    expected = ctx.profile.hca_link_layer
    if expected is None:
        yield Finding.skip(NODE, "profile states no link layer")
        return
    ports = list(compute_ports(ctx))
    for dev, port in ports:
        comp = port_component(dev, port)
        if port.link_layer is None:
            yield unknown_finding(comp, "link layer", port.unknown.get("link_layer"))
        elif port.link_layer != expected:
            yield Finding.fail(comp, f"compute port runs {port.link_layer}", port.link_layer,
                               expected, Action.FIX_CONFIG)
        else:
            yield Finding.passed(comp, "link layer as expected", port.link_layer)
    if not ports:
        yield no_compute(ctx)
