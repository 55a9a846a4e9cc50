"""RoCE compute fabrics: what a lossless RoCE v2 rail needs beyond an ACTIVE port.

A site profile with ``hca_link_layer: Ethernet`` says the compute rails are RoCE; its
``roce_priority`` (the one lossless priority), ``roce_trust`` (dscp | pcp) and
``roce_mtu`` say how the site built them. These checks judge the RoCE compute ports
(``IbDevice.role == "compute"``, link layer Ethernet) only; the InfiniBand-only checks
(ib.subnet_manager and the LID) skip such ports, and ib.port_state already fails a RoCE
compute port whose netdev is down, so nothing here repeats that.

How a priority is chosen (why NCCL_IB_TC must agree with the fabric): NCCL writes
NCCL_IB_TC into the GRH traffic class, which RoCE v2 carries as the IP ToS byte, so the
packets' DSCP is ``NCCL_IB_TC >> 2`` (106 = DSCP 26 with the ECN bits set). Under trust
dscp the NIC maps that DSCP to a priority through its DSCP-to-priority table (DSCP >> 3
unless the site changed it: 26 -> 3); under trust pcp the priority is the VLAN PCP, which
the driver takes from the service level, ``NCCL_IB_SL & 7``. Traffic on any other priority
is neither paused by PFC nor marked by ECN as the site intended.
"""

from __future__ import annotations

from collections.abc import Iterator

from ...agent.model.ib import IbDevice, IbPort, RoceQos
from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from .helpers import NODE, compute_ports, devices, port_component, unknown_finding

FIX = Action.FIX_CONFIG
ROCE_V2 = "RoCE v2"


def roce_ports(ctx: CheckContext) -> list[tuple[IbDevice, IbPort]]:
    return [(d, p) for d, p in compute_ports(ctx) if p.link_layer == "Ethernet"]


def not_roce(ctx: CheckContext) -> Finding | None:
    """Why these checks do not apply to this node, or None when they do."""
    if ctx.profile.hca_link_layer == "InfiniBand":
        return Finding.skip(NODE, "the profile's compute fabric is InfiniBand")
    if not devices(ctx):
        return Finding.skip(NODE, "no RDMA devices on this node")
    if not roce_ports(ctx):
        return Finding.skip(NODE, "no RoCE compute port on this node")
    return None


def _qos_unknown(comp: str, qos: RoceQos | None, key: str) -> Finding:
    """A skip naming why the host did not show ``key`` (no tool, no sysfs file)."""
    if qos is None:
        return Finding.skip(comp, "the port has no netdev to read its settings from")
    return Finding.skip(comp, f"{key} not readable: {qos.unknown.get(key, 'not read')}")


# -- roce.mtu ---------------------------------------------------------------------------


@check("roce.mtu", needs=("infiniband",),
       remedy="Set the compute netdevs' MTU to the fabric's (`ip link set DEV mtu 9000` and "
              "in the network configuration, with the switch ports to match): RoCE runs at "
              "the largest IB MTU (1024-4096 bytes) that fits in the netdev's MTU, so a "
              "1500-byte netdev holds every message to 1 KiB packets.",
       actions=(FIX,))
def mtu(ctx: CheckContext) -> Iterator[Finding]:
    """Every RoCE compute port's netdev has at least the profile's MTU (``roce_mtu``)."""
    if (reason := not_roce(ctx)) is not None:
        yield reason
        return
    expected = ctx.profile.roce_mtu
    if expected is None:
        yield Finding.skip(NODE, "profile states no RoCE MTU (roce_mtu)")
        return
    for dev, port in roce_ports(ctx):
        comp = port_component(dev, port)
        if port.netdev is None:
            yield Finding.error(comp, "RoCE port's netdev unknown: no GID-table netdev and "
                                      "not exactly one netdev on its PCI function")
        elif port.netdev_operstate not in (None, "up"):
            yield Finding.skip(comp, "netdev not up (see ib.port_state)")
        elif port.netdev_mtu is None:
            yield unknown_finding(comp, "netdev MTU", port.unknown.get("netdev_mtu"))
        elif port.netdev_mtu < expected:
            yield Finding.fail(comp, "RoCE netdev MTU below the fabric's",
                               {"netdev": port.netdev, "mtu": port.netdev_mtu},
                               f">= {expected}", FIX)
        else:
            yield Finding.passed(comp, "RoCE netdev MTU as expected",
                                 {"netdev": port.netdev, "mtu": port.netdev_mtu},
                                 f">= {expected}")


# -- roce.gid ---------------------------------------------------------------------------


def _gid(comp: str, port: IbPort) -> Finding:
    if not port.gids:
        reason = port.unknown.get("gids")
        if reason == "missing":
            return Finding.skip(comp, "no GID table in sysfs on this host")
        if reason is not None:
            return unknown_finding(comp, "GID table", reason)
        return Finding.fail(comp, "GID table empty: the netdev has no address, so RoCE "
                                  "has nothing to reach peers with",
                            {"netdev": port.netdev}, "a RoCE v2 GID", FIX)
    v2 = [g for g in port.gids if g.type == ROCE_V2]
    if v2:
        return Finding.passed(comp, "RoCE v2 GID present",
                              {g.index: g.gid for g in v2[:4]}, ROCE_V2)
    if all(g.type is None for g in port.gids):
        return Finding.skip(comp, "GID types not readable on this host (containers return "
                                  "EINVAL for gid_attrs)")
    return Finding.fail(comp, "no RoCE v2 GID: only RoCE v1 entries",
                        {g.index: g.type for g in port.gids}, ROCE_V2, FIX)


@check("roce.gid", needs=("infiniband",),
       remedy="RoCE v2 GIDs come from the netdev's IP addresses: give the compute netdev its "
              "address (`ip addr`), check that `rdma link` shows the netdev bound to the "
              "device, and that RoCE v2 is enabled (`cma_roce_mode -d DEV -p 1`, "
              "`show_gids`).",
       actions=(FIX,))
def gid(ctx: CheckContext) -> Iterator[Finding]:
    """Every RoCE compute port has a RoCE v2 GID (NCCL uses RoCE v2 by default)."""
    if (reason := not_roce(ctx)) is not None:
        yield reason
        return
    for dev, port in roce_ports(ctx):
        yield _gid(port_component(dev, port), port)


# -- roce.ecn ---------------------------------------------------------------------------


@check("roce.ecn", needs=("infiniband",),
       remedy="Enable ECN for the RoCE priority on both sides of DCQCN: "
              "`echo 1 > /sys/class/net/DEV/ecn/roce_np/enable/PRIO` (notification point: "
              "sends CNPs) and `.../roce_rp/enable/PRIO` (reaction point: slows down on "
              "CNPs), and make it persistent in the host's network configuration.",
       actions=(FIX,))
def ecn(ctx: CheckContext) -> Iterator[Finding]:
    """ECN (DCQCN) is on for the lossless priority as notification and reaction point."""
    if (reason := not_roce(ctx)) is not None:
        yield reason
        return
    prio = ctx.profile.roce_priority
    if prio is None:
        yield Finding.skip(NODE, "profile names no lossless RoCE priority (roce_priority)")
        return
    for dev, port in roce_ports(ctx):
        comp = port_component(dev, port)
        qos = port.qos
        if qos is None or qos.ecn_np is None or qos.ecn_rp is None:
            key = "ecn/roce_np" if qos is None or qos.ecn_np is None else "ecn/roce_rp"
            yield _qos_unknown(comp, qos, key)
            continue
        off = [point for point, on in (("notification point", qos.ecn_np),
                                       ("reaction point", qos.ecn_rp)) if prio not in on]
        observed = {"netdev": port.netdev, "roce_np": qos.ecn_np, "roce_rp": qos.ecn_rp}
        if off:
            yield Finding.fail(comp, f"ECN off for priority {prio} ({' and '.join(off)})",
                               observed, f"enabled for priority {prio}", FIX)
        else:
            yield Finding.passed(comp, f"ECN on for priority {prio}", observed)


# -- roce.pfc ---------------------------------------------------------------------------


def _pfc(comp: str, port: IbPort, prio: int | None, trust: str | None) -> Iterator[Finding]:
    qos = port.qos
    if qos is None:
        yield _qos_unknown(comp, qos, "pfc")
        return
    observed = {"netdev": port.netdev, "pfc": qos.pfc, "trust": qos.trust, "from": qos.tool}
    wrong = []
    if prio is not None and qos.pfc is not None and prio not in qos.pfc:
        wrong.append(f"PFC off for priority {prio}")
    if trust is not None and qos.trust is not None and qos.trust != trust:
        wrong.append(f"trust {qos.trust}, not {trust}")
    expected = {"pfc": prio, "trust": trust}
    if wrong:
        yield Finding.fail(comp, "; ".join(wrong), observed, expected, FIX)
        return
    missing = [k for k, want in (("pfc", prio), ("trust", trust))
               if want is not None and getattr(qos, k) is None]
    if missing:
        yield _qos_unknown(comp, qos, missing[0])
    else:
        yield Finding.passed(comp, "PFC and trust as the fabric expects", observed, expected)


@parameters
class PfcParams(Params):
    read_tools: bool = param(
        True, doc="the collector runs dcb (else mlnx_qos) to read PFC and trust; false: "
        "neither runs")


@check("roce.pfc", needs=("infiniband",), params=PfcParams,
       remedy="Turn PFC on for the lossless priority and set the trust mode the switches use: "
              "`dcb pfc set dev DEV prio-pfc all:off PRIO:on` and DSCP entries with `dcb app` "
              "(trust dscp), or `mlnx_qos -i DEV --pfc 0,0,0,1,0,0,0,0 --trust dscp`; make "
              "it persistent, and check the switch ports agree.",
       actions=(FIX,))
def pfc(ctx: CheckContext) -> Iterator[Finding]:
    """PFC is on for the lossless priority and the NIC trusts the profile's field
    (read from ``dcb``, else ``mlnx_qos``; ``read_tools: false`` keeps the IB source from
    running either)."""
    if (reason := not_roce(ctx)) is not None:
        yield reason
        return
    prio, trust = ctx.profile.roce_priority, ctx.profile.roce_trust
    if prio is None and trust is None:
        yield Finding.skip(NODE, "profile names no lossless RoCE priority or trust mode "
                                 "(roce_priority, roce_trust)")
        return
    for dev, port in roce_ports(ctx):
        yield from _pfc(port_component(dev, port), port, prio, trust)


# -- roce.nccl --------------------------------------------------------------------------


def _number(env: dict[str, str], name: str, top: int) -> int | None:
    """The variable as an integer 0..top (NCCL's default, 0, when unset); None when it
    is not one."""
    text = env.get(name, "0").strip()
    return int(text) if text.isdecimal() and int(text) <= top else None


def _priority(port: IbPort, trust: str | None, tc: int, sl: int) -> int | None:
    """The priority NCCL's packets get on this port; None when the trust is unknown."""
    if trust == "pcp":
        return sl & 7
    if trust != "dscp":
        return None
    dscp = tc >> 2
    table = port.qos.dscp_prio if port.qos is not None else None
    return table[dscp] if table is not None and len(table) == 64 else dscp >> 3


def _gid_index(comp: str, port: IbPort, text: str) -> Finding | None:
    """A fixed NCCL_IB_GID_INDEX that names a RoCE v1 entry on this port; None when the
    index is auto (-1), garbage or empty (both nccl.env's to judge) or a RoCE v2 GID."""
    if not text.isdecimal():
        return None
    entry = next((g for g in port.gids if g.index == int(text)), None)
    if entry is None or entry.type in (None, ROCE_V2):
        return None
    return Finding.fail(comp, f"NCCL_IB_GID_INDEX={text} is a {entry.type} GID on this port",
                        {"index": int(text), "type": entry.type, "gid": entry.gid}, ROCE_V2,
                        FIX)


def _lands(comp: str, port: IbPort, trust: str | None, tc: int, sl: int, prio: int,
           env: dict[str, str], sources: dict[str, str]) -> Finding:
    lands = _priority(port, trust, tc, sl)
    if lands is None:
        return Finding.skip(comp, "trust mode unknown (not readable, and the profile names no "
                                  "roce_trust): cannot tell NCCL's priority")
    observed = {"NCCL_IB_TC": tc, "NCCL_IB_SL": sl, "trust": trust, "priority": lands,
                "set_in": {k: sources.get(k, "unset") for k in ("NCCL_IB_TC", "NCCL_IB_SL")}}
    if lands == prio:
        return Finding.passed(comp, f"NCCL's traffic lands on priority {prio}", observed, prio)
    if "NCCL_IB_TC" not in env and "NCCL_IB_SL" not in env:
        # Jobs may set it themselves: clusterdiag sees the node's files and its own
        # environment only.
        return Finding.warn(comp, f"NCCL_IB_TC is not set where clusterdiag can see it: "
                                  f"NCCL's traffic would land on priority {lands}, not the "
                                  f"lossless {prio}", observed, prio, FIX)
    return Finding.fail(comp, f"NCCL's traffic lands on priority {lands}, not the lossless "
                              f"{prio}", observed, prio, FIX)


@check("roce.nccl", needs=("infiniband", "nccl"),
       remedy="Set NCCL_IB_TC so that NCCL's traffic lands on the lossless priority: under "
              "trust dscp, TC = DSCP << 2 (DSCP 26 -> priority 3 -> NCCL_IB_TC=104, or 106 "
              "with the ECN bits), under trust pcp, NCCL_IB_SL = the priority; set it in "
              "/etc/nccl.conf or the site's job environment. Leave NCCL_IB_GID_INDEX unset "
              "(NCCL >= 2.21 picks a RoCE v2 GID) or point it at a RoCE v2 entry.",
       actions=(FIX,))
def nccl_priority(ctx: CheckContext) -> Iterator[Finding]:
    """On every RoCE compute port, NCCL_IB_TC (NCCL_IB_SL under trust pcp) puts NCCL's
    traffic on the lossless priority, and a fixed NCCL_IB_GID_INDEX names a RoCE v2 GID."""
    if (reason := not_roce(ctx)) is not None:
        yield reason
        return
    info = ctx.snapshot.nccl
    if info is None:
        yield Finding.error(NODE, "NCCL settings were not collected")
        return
    prio = ctx.profile.roce_priority
    tc, sl = _number(info.env, "NCCL_IB_TC", 255), _number(info.env, "NCCL_IB_SL", 15)
    if tc is None or sl is None:
        name, top = ("NCCL_IB_TC", 255) if tc is None else ("NCCL_IB_SL", 15)
        yield Finding.fail(NODE, f"{name} is not a number 0-{top}", info.env.get(name),
                           f"0-{top}", FIX)
        return
    if prio is None:
        yield Finding.skip(NODE, "profile names no lossless RoCE priority (roce_priority)")
    gid_index = info.env.get("NCCL_IB_GID_INDEX", "-1").strip()
    for dev, port in roce_ports(ctx):
        comp = port_component(dev, port)
        if (wrong := _gid_index(comp, port, gid_index)) is not None:
            yield wrong
        elif prio is not None:
            trust = (port.qos.trust if port.qos is not None and port.qos.trust
                     else ctx.profile.roce_trust)
            yield _lands(comp, port, trust, tc, sl, prio, info.env, info.env_sources)
