"""What each InfiniBand/RoCE fault kind does to a simulated node (the table is catalog.py).

Faults name an HCA by ibdev name (``hca``) and optionally a ``port`` (default 1), as
docs/design.md §7 says. Each changes only what the real failure changes, so the one check meant
to catch it does and the others stay quiet: a port without a subnet manager still has
its physical link up (INIT + LinkUp), a flapping link is ACTIVE again between flaps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...model.ib import COUNTER_MAX
from ..state.counter import Counter
from ..state.hardware import SimNode
from ..state.ib import ROCE_PRIORITY, SimHca, SimIbPort
from ..state.layout import HCA_LAYOUTS

Apply = Callable[[SimNode, Mapping[str, Any]], None]

# Kinds that need a RoCE (Ethernet link layer) storage port; every other HCA kind wants a
# compute rail (InfiniBand, or RoCE on a node built with fabric: roce, which the roce_*
# kinds need: FaultKind.fabric).
ETHERNET_KINDS = frozenset({"roce_netdev_down"})
_SLOWER = {"XDR": "NDR", "NDR": "HDR", "HDR": "EDR", "EDR": "FDR", "FDR": "QDR"}


def hca_of(node: SimNode, fault: Mapping[str, Any]) -> SimHca:
    for hca in node.hcas:
        if hca.name == fault["hca"]:
            return hca
    raise KeyError(f"{node.name} has no HCA {fault['hca']}")


def port_of(node: SimNode, fault: Mapping[str, Any]) -> SimIbPort:
    return hca_of(node, fault).port(int(fault.get("port", 1)))


def hca_problem(kind: str, profile: str, hca: str, port: int) -> str | None:
    """Why ``hca``/``port`` cannot carry fault ``kind`` on ``profile``; None when it can."""
    slots = {s.name: s for s in HCA_LAYOUTS.get(profile, ())}
    if hca not in slots:
        known = ", ".join(sorted(slots)) or "none"
        return f"no HCA {hca!r} on {profile} (known: {known})"
    if port != 1:
        return f"{hca} has no port {port}"
    if kind in ETHERNET_KINDS and slots[hca].link_layer != "Ethernet":
        return f"{hca} is not a RoCE (Ethernet) port"
    if kind not in ETHERNET_KINDS and slots[hca].role != "compute":
        return f"{hca} is not a compute HCA"
    return None


def example_hca(profile: str, kind: str) -> str:
    """The first HCA of ``profile`` that fault ``kind`` applies to (for tests and docs)."""
    for slot in HCA_LAYOUTS.get(profile, ()):
        if hca_problem(kind, profile, slot.name, 1) is None:
            return slot.name
    raise LookupError(f"{profile} has no HCA for {kind}")


def _port_set(**values: Any) -> Apply:
    def apply(node: SimNode, fault: Mapping[str, Any]) -> None:
        port = port_of(node, fault)
        for name, value in values.items():
            setattr(port, name, value)
    return apply


def _counter(name: str, rate_per_s: float, base: int = 0) -> Apply:
    def apply(node: SimNode, fault: Mapping[str, Any]) -> None:
        port_of(node, fault).counters[name] = Counter(base, rate_per_s)
    return apply


def _hw_counter(name: str, rate_per_s: float) -> Apply:
    def apply(node: SimNode, fault: Mapping[str, Any]) -> None:
        port_of(node, fault).hw_counters[name] = Counter(0, rate_per_s)
    return apply


def roce_ecn_off(node: SimNode, fault: Mapping[str, Any]) -> None:
    """ECN switched off for the lossless priority on the notification point (no CNPs)."""
    port = port_of(node, fault)
    port.ecn_np = [p for p in port.ecn_np if p != ROCE_PRIORITY]


def roce_nccl_tc_wrong(node: SimNode, fault: Mapping[str, Any]) -> None:
    """/etc/nccl.conf puts NCCL on DSCP 0 (a copied config from an InfiniBand cluster)."""
    node.nccl.conf["NCCL_IB_TC"] = str(fault.get("tc", 0))


def hca_missing(node: SimNode, fault: Mapping[str, Any]) -> None:
    hca_of(node, fault).present = False


def rate_degraded(node: SimNode, fault: Mapping[str, Any]) -> None:
    port = port_of(node, fault)
    port.speed = _SLOWER.get(port.speed, "SDR")


def link_layer_ethernet(node: SimNode, fault: Mapping[str, Any]) -> None:
    """A VPI port set to Ethernet (mlxconfig LINK_TYPE_P1=2): RoCE, no LIDs."""
    port = port_of(node, fault)
    port.link_layer, port.lid, port.sm_lid, port.mtu = "Ethernet", 0, 0, 9000
    port.netdev = "en" + port.netdev.removeprefix("ib") + "np0"


def firmware_mixed(node: SimNode, fault: Mapping[str, Any]) -> None:
    hca_of(node, fault).fw_ver = str(fault.get("version", "28.39.1002"))


def pcie_degraded(node: SimNode, fault: Mapping[str, Any]) -> None:
    hca_of(node, fault).pcie_width = 8


def mlx5_health(node: SimNode, fault: Mapping[str, Any]) -> None:
    bdf = hca_of(node, fault).pci_bdf
    # mlx5 health.c poll_health, as gpud's and our kernel-log fixtures show it.
    node.kernel_lines.append((60.0, f"mlx5_core {bdf}: poll_health:813:(pid 0): "
                                    "Fatal error 1 detected"))


port_down = _port_set(state="DOWN", phys_state="Disabled", netdev_operstate="down")
port_polling = _port_set(state="DOWN", phys_state="Polling", netdev_operstate="down")
width_degraded = _port_set(width=2)
# RoCE compute rails (a node built with fabric: roce, judged with a RoCE site profile).
roce_pfc_off = _port_set(pfc=[])
roce_trust_pcp = _port_set(dscp_prio={})  # no DSCP entries: mlx5 trusts PCP
roce_no_v2_gid = _port_set(roce_v2_gids=False)  # RoCE v2 disabled: only v1 entries
roce_mtu_small = _port_set(mtu=1500)
sm_missing = _port_set(state="INIT", lid=0, sm_lid=0, netdev_operstate="down")
# The SM configured the port (it has its LID) and stopped short of ACTIVE.
port_init = _port_set(state="INIT", netdev_operstate="down")
port_armed = _port_set(state="ARMED", netdev_operstate="down")
# A connection breaking over and over: RNR retries exhausted (QPs to error).
rnr_retry_exceeded = _hw_counter("rnr_nak_retry_err", 50.0)
netdev_down = _port_set(state="DOWN", phys_state="Disabled", netdev_operstate="down")
symbol_errors = _counter("symbol_error", 500.0)
link_downed = _counter("link_downed", 2.0)
# A link that retrains once every two minutes: one recovery per agent interval at most.
link_flapping = _counter("link_error_recovery", 1 / 120)
rcv_errors = _counter("port_rcv_errors", 200.0)
xmit_wait = _counter("port_xmit_wait", 5.0e6)
counter_saturated = _counter("symbol_error", 0.0, COUNTER_MAX["symbol_error"])
