"""Simulated RDMA devices: what each /sys/class/infiniband file of a node will say.

Built from the platform's ``HCA_LAYOUTS`` entry and changed by faults. Counters are
``counter.Counter`` (base, rate) pairs against the node's epoch, like NVML's; the narrow
IBA error counters stop at their maximum as the spec says real ones do.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ...model.ib import COUNTER_BITS, COUNTER_MAX, DATA_COUNTERS
from .counter import Counter
from .layout import HCA_LAYOUTS, OEM_HCA_LAYOUTS, HcaSlot


@dataclass(frozen=True)
class SimVpd:
    """What a ConnectX function's Vital Product Data says (writers/vpd.py encodes it):
    its identifier string, part number, the VA keyword's MODL, serial (SN) and UUID (V3),
    and whether the function manages NVSwitches (HGX B200: SMDL=SW_MNG in VA)."""

    product: str
    part: str
    model: str
    serial: str
    uuid: str
    manages_nvswitch: bool = False


def build_vpd(product: str, part: str, model: str, serial_seed: str,
              manages_nvswitch: bool = False) -> SimVpd:
    """A function's VPD, its serial and UUID stable per ``serial_seed`` (node and slot)."""
    digest = hashlib.sha256(serial_seed.encode()).hexdigest()
    return SimVpd(product, part, model, "MT" + digest[:10].upper(), digest[:32],
                  manages_nvswitch)


@dataclass(frozen=True)
class Model:
    hca_type: str
    device_id: str  # PCI device id
    fw_ver: str
    board_id: str
    # VPD (SimVpd): the identifier string, part number and the VA keyword's MODL.
    product: str = ""
    part: str = ""
    modl: str = ""


# ConnectX-7 and BlueField-3 strings as the real H100 node reports them (gpud tree);
# ConnectX-6 and ConnectX-8 follow the same formats with their own device ids
# (MT4123 CX-6 unverified; MT4131 CX-8, PCI 15b3:1023, fw 40.x per NVIDIA's driver release notes).
MODELS: dict[str, Model] = {
    "cx6": Model("MT4123", "0x101b", "20.39.1002", "MT_0000000223",
                 "NVIDIA ConnectX-6 VPI adapter card, HDR IB", "MCX653105A-HDAT", "CX653105A"),
    # ConnectX-6 Dx (PCI 15b3:101d -> MT4125), unverified strings like cx6's.
    "cx6dx": Model("MT4125", "0x101d", "22.39.1002", "MT_0000000359",
                   "NVIDIA ConnectX-6 Dx EN adapter card, 100GbE", "MCX623106AN-CDAT",
                   "CX623106A"),
    "cx7": Model("MT4129", "0x1021", "28.41.1000", "MT_0000000838",
                 "NVIDIA ConnectX-7 HHHL Adapter Card, 400GbE / NDR IB, Single-port OSFP",
                 "MCX75310AAS-NEAT", "CX75310A"),
    "cx8": Model("MT4131", "0x1023", "40.44.1036", "MT_0000001093",
                 "NVIDIA ConnectX-8 SuperNIC, 800G XDR", "C8180", "C8180"),
    "bf3": Model("MT41692", "0xa2dc", "32.38.3056", "MT_0000000884",
                 "NVIDIA BlueField-3 B3220 P-Series DPU, 200GbE/NDR200", "900-9D3B6-00CV-AA0",
                 "BF3220"),
}

# Per-lane Gb/s of each speed name (rate_show in drivers/infiniband/core/sysfs.c).
LANE_GBPS = {"SDR": 2.5, "DDR": 5.0, "QDR": 10.0, "FDR10": 10.0, "FDR": 14.0, "EDR": 25.0,
             "HDR": 50.0, "NDR": 100.0, "XDR": 200.0}
STATES = {"DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4, "ACTIVE_DEFER": 5}
PHYS_STATES = {"Sleep": 1, "Polling": 2, "Disabled": 3, "PortConfigurationTraining": 4,
               "LinkUp": 5, "LinkErrorRecovery": 6, "Phy Test": 7}
HW_COUNTERS = ("duplicate_request", "implied_nak_seq_err", "lifespan", "local_ack_timeout_err",
               "out_of_buffer", "out_of_sequence", "packet_seq_err", "req_cqe_error",
               "req_cqe_flush_error", "req_remote_access_errors", "req_remote_invalid_request",
               "resp_cqe_error", "resp_cqe_flush_error", "resp_local_length_error",
               "resp_remote_access_errors", "rnr_nak_retry_err", "rx_atomic_requests",
               "rx_read_requests", "rx_write_requests")
_PACKET_COUNTERS = ("port_xmit_packets", "port_rcv_packets", "unicast_xmit_packets",
                    "unicast_rcv_packets", "multicast_xmit_packets", "multicast_rcv_packets")


@dataclass
class SimIbPort:
    port: int
    link_layer: str
    width: int
    speed: str
    netdev: str
    state: str = "ACTIVE"
    phys_state: str = "LinkUp"
    lid: int = 0
    sm_lid: int = 0
    sm_sl: int = 0
    netdev_operstate: str = "up"
    mtu: int = 4092
    # RoCE (Ethernet ports): the GID table's RoCE v2 entries, ECN per priority (mlx5's
    # default: on for every priority), PFC priorities and the trust mode (firmware
    # defaults: none, pcp) and the DSCP application entries ``dcb app`` shows.
    roce_v2_gids: bool = True
    ecn_np: list[int] = field(default_factory=lambda: list(range(8)))
    ecn_rp: list[int] = field(default_factory=lambda: list(range(8)))
    pfc: list[int] = field(default_factory=list)
    dscp_prio: dict[int, int] = field(default_factory=dict)  # none: trust pcp
    counters: dict[str, Counter] = field(default_factory=dict)
    hw_counters: dict[str, Counter] = field(default_factory=dict)

    @property
    def rate_text(self) -> str:
        gbps = self.width * LANE_GBPS[self.speed]
        return f"{gbps:g} Gb/sec ({self.width}X {self.speed})"

    def counter_value(self, name: str, epoch: float) -> int:
        """A counter's value now; narrow error counters stop at their maximum."""
        value = self.counters[name].value(epoch)
        limit = COUNTER_MAX.get(name)
        return min(value, limit) if limit is not None else value


@dataclass
class SimHca:
    name: str
    pci_bdf: str
    numa: int
    fw_ver: str
    hca_type: str
    board_id: str
    device_id: str
    node_guid: str
    role: str  # what the platform uses it for: compute | storage
    node_desc: str = ""
    gpu_bdf: str | None = None  # the GPU whose PCIe switch it shares
    pcie_gen: int = 5
    pcie_width: int = 16
    max_pcie_gen: int = 5
    max_pcie_width: int = 16
    present: bool = True  # False: the PCI function is there but no RDMA device
    vpd: SimVpd | None = None  # the function's VPD; None: no vpd file
    ports: list[SimIbPort] = field(default_factory=list)

    def port(self, number: int) -> SimIbPort:
        for port in self.ports:
            if port.port == number:
                return port
        raise KeyError(f"{self.name} has no port {number}")


# Kernel ABI sysfs-class-infiniband: RoCE v2 IPv4-mapped GIDs; IB ports use the default
# subnet prefix.
_IB_GID_PREFIX = "fe80:0000:0000:0000"


def gid(hca: SimHca, port: SimIbPort) -> str:
    """The port's GID: the subnet prefix and node GUID on InfiniBand, an IPv4-mapped
    address on RoCE."""
    guid = hca.node_guid.replace(":", "")
    if port.link_layer == "InfiniBand":
        return f"{_IB_GID_PREFIX}:{guid[0:4]}:{guid[4:8]}:{guid[8:12]}:{guid[12:16]}"
    return f"0000:0000:0000:0000:0000:ffff:0a00:{int(guid[-2:], 16):04x}"


def _guid(node: str, bdf: str) -> str:
    digest = hashlib.sha256(f"{node}/{bdf}".encode()).hexdigest()
    # ConnectX GUIDs carry NVIDIA/Mellanox OUIs; the rest is stable per node and slot.
    raw = "a088c2" + digest[:10]
    return ":".join(raw[i:i + 4] for i in range(0, 16, 4))


def _port(slot: HcaSlot, lid: int) -> SimIbPort:
    port = SimIbPort(1, slot.link_layer, slot.width, slot.speed, slot.netdev)
    if slot.link_layer == "InfiniBand":
        port.lid, port.sm_lid, port.mtu = lid, 1, 4092
    else:
        port.mtu = 9000
    port.counters = {name: Counter() for name in COUNTER_BITS}
    for name in (*DATA_COUNTERS, *_PACKET_COUNTERS):
        port.counters[name] = Counter(base=1_000_000 + lid)
    port.hw_counters = {name: Counter(base=10 if name == "lifespan" else 0)
                        for name in HW_COUNTERS}
    return port


# A RoCE compute fabric as sites commonly build it (NVIDIA's lossless RoCE guide; the
# values the RoCE site profile in tests/fixtures names): RoCE traffic on DSCP 26 ->
# priority 3 with PFC and ECN on, CNPs on DSCP 48 -> priority 6, trust dscp, MTU 9000;
# NCCL told so in /etc/nccl.conf (traffic class 106 = DSCP 26 << 2 with ECT set).
ROCE_PRIORITY = 3
ROCE_DSCP = {26: ROCE_PRIORITY, 48: 6}
ROCE_NCCL_TC = "106"


def roce_fabric(hcas: list[SimHca]) -> None:
    """Turn the compute rails into RoCE ports on a lossless priority-3 fabric: the same
    ConnectX cards with their ports set to Ethernet (LINK_TYPE_P1=2)."""
    for hca in hcas:
        if hca.role != "compute":
            continue
        for port in hca.ports:
            port.link_layer, port.lid, port.sm_lid, port.mtu = "Ethernet", 0, 0, 9000
            port.netdev = port.netdev.replace("ib", "en", 1) + "np0"
            port.pfc, port.dscp_prio = [ROCE_PRIORITY], dict(ROCE_DSCP)


def build_hcas(node_name: str, profile: str, pcie_gen: int | None, pcie_width: int | None,
               oem: bool = False) -> list[SimHca]:
    """The healthy RDMA devices of ``profile``'s platform (``oem``: its OEM layout)."""
    hcas = []
    for i, slot in enumerate((OEM_HCA_LAYOUTS if oem else HCA_LAYOUTS).get(profile, ())):
        model = MODELS[slot.model]
        gen, width = pcie_gen or 5, pcie_width or 16
        hca = SimHca(name=slot.name, pci_bdf=slot.bdf, numa=slot.numa, fw_ver=model.fw_ver,
                     hca_type=model.hca_type, board_id=model.board_id,
                     device_id=model.device_id, node_guid=_guid(node_name, slot.bdf),
                     role=slot.role, node_desc=f"{node_name} {slot.name}",
                     gpu_bdf=slot.gpu_bdf, pcie_gen=gen, pcie_width=width,
                     max_pcie_gen=gen, max_pcie_width=width,
                     vpd=build_vpd(model.product, model.part, model.modl,
                                   f"{node_name}/{slot.bdf}", slot.manages_nvswitch))
        hca.ports = [_port(slot, lid=0x10 + i)]
        hcas.append(hca)
    return hcas
