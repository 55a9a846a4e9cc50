"""InfiniBand / RoCE devices and ports as /sys/class/infiniband shows them (docs/design.md §8).

Values are as the kernel printed them, parsed but not judged. ``counters`` holds the IBA
PortCounters under the kernel's file names, with the two data counters converted from
4-octet words to bytes; ``saturated`` names the counters pinned at their maximum, which
the IBA spec says stop there instead of wrapping: such a value is "at least this many",
never a rate of zero.
"""

from __future__ import annotations

from .record import field, record

# Roles a device can have on the node; only "compute" devices are NCCL rails.
ROLES = ("compute", "storage", "management", "unknown")
# hca_type is "MT" + the PCI device id in decimal: 0xa2d6 BlueField-2, 0xa2dc BlueField-3
# (MT41692 = BlueField-3 on the real H100 node of gpud's sys-class-infiniband-h100 testdata).
DPU_TYPES = frozenset({"MT41686", "MT41692"})

# The vendor-specific VPD entry (``SMDL=`` inside a read-only ``Vx`` field, ConnectX's
# ``VA``: ``MLX:MN=MLNX:...:SMDL=SW_MNG:MODL=...``) and its value that marks the ConnectX-7
# functions an HGX/DGX B200 or B300 baseboard manages its NVSwitches through: its
# NVSwitches are no PCI functions there. Fabric Manager user guide ("Systems using fourth
# generation NVSwitches": the LPF's VPD "includes a vendor-specific field called SMDL, with
# a non-zero value defined as SW_MNG"); NVIDIA/gpu-driver-container's
# ``_assert_nvlink5_system`` greps ``/sys/class/infiniband/*/device/vpd`` for it; the
# key=value sits in the VA field (L. Romanovsky, linux-pci, 2024-11-07, "PCI/sysfs: Fix
# read permissions for VPD attributes").
SMDL_KEY = "SMDL"
NVSWITCH_MANAGEMENT = "SW_MNG"

# Width of each narrow PortCounters field (drivers/infiniband/core/sysfs.c PORT_PMA_ATTR).
# The data and packet counters come from PortCountersExtended (64-bit) on every ConnectX,
# so they have no practical maximum and are not listed.
COUNTER_BITS: dict[str, int] = {
    "symbol_error": 16,
    "link_error_recovery": 8,
    "link_downed": 8,
    "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16,
    "port_rcv_switch_relay_errors": 16,
    "port_xmit_discards": 16,
    "port_xmit_constraint_errors": 8,
    "port_rcv_constraint_errors": 8,
    "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4,
    "VL15_dropped": 16,
    "port_xmit_wait": 32,
}
COUNTER_MAX: dict[str, int] = {name: (1 << bits) - 1 for name, bits in COUNTER_BITS.items()}

# "Total number of data octets, divided by 4 (lanes)" (kernel ABI): bytes = value x 4.
DATA_COUNTERS = ("port_xmit_data", "port_rcv_data")


@record
class RoceGid:
    """One non-empty entry of a RoCE port's GID table (``gids/<index>`` and its
    ``gid_attrs``)."""

    index: int
    gid: str
    type: str | None = None  # "RoCE v2" | "IB/RoCE v1"; None when unreadable (containers)
    netdev: str | None = None


@record
class RoceQos:
    """The congestion settings of a RoCE port's netdev, where the host exposes them.

    ECN comes from mlx5's sysfs (``/sys/class/net/<if>/ecn/roce_np|roce_rp/enable/<prio>``);
    PFC, the trust mode and the DSCP-to-priority map from ``dcb`` (iproute2) or
    ``mlnx_qos`` output. ``None`` means not read, and ``unknown`` says why."""

    ecn_np: list[int] | None = None  # priorities with ECN on as notification point
    ecn_rp: list[int] | None = None  # ... as reaction point
    pfc: list[int] | None = None  # priorities with PFC on
    trust: str | None = None  # "dscp" | "pcp"
    dscp_prio: list[int] | None = None  # priority of DSCP 0..63, where the tool prints it
    tool: str | None = None  # which tool PFC and trust came from: dcb | mlnx_qos
    unknown: dict[str, str] = field(default_factory=dict)


@record
class IbPort:
    """One InfiniBand or RoCE port: link state, rate, addresses, counters and, for
    RoCE, its netdev, GIDs and congestion settings."""

    port: int
    state: str | None = None  # ACTIVE, DOWN, INIT, ...
    phys_state: str | None = None  # LinkUp, Polling, Disabled, ...
    rate_gbps: float | None = None
    width: str | None = None  # 4X
    speed: str | None = None  # NDR
    link_layer: str | None = None  # InfiniBand | Ethernet
    lid: int | None = None
    sm_lid: int | None = None
    sm_sl: int | None = None
    cap_mask: int | None = None
    gid_prefix: str | None = None
    netdev: str | None = None
    netdev_operstate: str | None = None
    netdev_mtu: int | None = None
    gids: list[RoceGid] = field(default_factory=list)  # Ethernet (RoCE) ports only
    qos: RoceQos | None = None  # Ethernet (RoCE) ports only
    counters: dict[str, int | None] = field(default_factory=dict)
    hw_counters: dict[str, int | None] = field(default_factory=dict)
    saturated: list[str] = field(default_factory=list)
    unknown: dict[str, str] = field(default_factory=dict)


@record
class IbDevice:
    """One RDMA device (an HCA, a DPU function, a bond) with its ports and its place
    on the PCI tree relative to the GPUs."""

    name: str
    fw_ver: str | None = None
    node_guid: str | None = None
    sys_image_guid: str | None = None
    hca_type: str | None = None
    board_id: str | None = None
    node_desc: str | None = None
    pci_bdf: str | None = None
    # Decided when judging (checks/core/rails.py) from the facts here and the profile: a
    # snapshot as collected says "unknown".
    role: str = "unknown"  # compute | storage | management | unknown (ROLES)
    role_reason: str = ""
    excluded: bool = False  # counters not read: a BlueField DPU, or config names it storage
    # PCIe hops between this function and each GPU it shares a bridge (switch or root port)
    # with, through their deepest shared bridge: 4 = on two ports of one PCIe switch.
    gpu_hops: dict[str, int] = field(default_factory=dict)
    numa_node: int | None = None
    pcie_speed_gts: float | None = None
    pcie_width: int | None = None
    pcie_max_speed_gts: float | None = None
    pcie_max_width: int | None = None
    # The read-only VPD keywords of the PCI function (PN, EC, V0, VA, ...; not SN, the
    # serial), as collectors/vpd.py read them; empty when the function has no VPD, and
    # ``unknown["vpd"]`` says why when it had one that could not be read.
    vpd: dict[str, str] = field(default_factory=dict)
    ports: list[IbPort] = field(default_factory=list)
    unknown: dict[str, str] = field(default_factory=dict)


def vpd_entries(vpd: dict[str, str]) -> dict[str, str]:
    """The ``KEY=value`` entries inside the vendor-specific VPD keywords (``V0``..``VZ``),
    split at ``:`` and ``,`` (ConnectX writes ``MLX:MN=MLNX:CSKU=V2:...``)."""
    entries: dict[str, str] = {}
    for keyword, value in vpd.items():
        if len(keyword) == 2 and keyword[0] == "V":
            for item in value.replace(",", ":").split(":"):
                key, sep, val = item.partition("=")
                if sep and key.strip():
                    entries.setdefault(key.strip(), val.strip())
    return entries


def nvswitch_management(dev: IbDevice) -> bool:
    """Whether the device is an NVSwitch management function: its VPD says SMDL=SW_MNG."""
    return vpd_entries(dev.vpd).get(SMDL_KEY) == NVSWITCH_MANAGEMENT
