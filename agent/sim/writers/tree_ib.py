"""Writes a simulated node's RDMA devices the way the kernel lays them out.

Each NIC is a PCI function (under its GPU's switch, or its own root port); its RDMA
device lives below it (``.../0000:18:00.0/infiniband/mlx5_0`` with ``device`` -> the
function) and ``/sys/class/infiniband/mlx5_0`` links there, likewise its netdev under
``net/``. So ``realpath(/sys/class/infiniband/X/device)`` gives the PCIe path, as NCCL
and the IB collector expect. Counters a fault makes move are rewritten before each
sample by :func:`refresh_counters` (``SourceEnv.before_sample``).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..state.hardware import SimNode
from ..state.ib import LANE_GBPS, PHYS_STATES, STATES, SimHca, SimIbPort, gid
from ..state.pci import hca_bridges
from .pci_tree import PciTree
from .vpd import encode_vpd

_IB_CLASS, _ETH_CLASS = "0x020700", "0x020000"
_ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text.endswith("\n") else text + "\n")


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        os.symlink(os.path.relpath(target, link.parent), link)


def _write_port(node: SimNode, hca: SimHca, port: SimIbPort, base: Path) -> None:
    files = {
        "state": f"{STATES[port.state]}: {port.state}",
        "phys_state": f"{PHYS_STATES[port.phys_state]}: {port.phys_state}",
        "rate": port.rate_text, "link_layer": port.link_layer,
        "lid": f"0x{port.lid:x}", "sm_lid": f"0x{port.sm_lid:x}", "sm_sl": str(port.sm_sl),
        "lid_mask_count": "0", "cap_mask": "0xa751e84a" if port.link_layer == "InfiniBand"
        else "0x04010000",
        "gids/0": gid(hca, port), "gid_attrs/types/0": "IB/RoCE v1",
        # The P_Key table's first entry, the default full-membership key (the kernel's
        # show_port_pkey, "0x%04x"); libibumad reads the table and ibstat gives up on a
        # port without one.
        "pkeys/0": "0xffff",
    }
    if port.link_layer == "Ethernet":
        files["gid_attrs/ndevs/0"] = port.netdev
        files["gids/1"] = gid(hca, port) if port.roce_v2_gids else _ZERO_GID
        if port.roce_v2_gids:
            files["gid_attrs/types/1"] = "RoCE v2"
            files["gid_attrs/ndevs/1"] = port.netdev
        for index in range(2, 16):  # the rest of the table: empty entries read as zeros
            files[f"gids/{index}"] = _ZERO_GID
    for name, text in files.items():
        _write(base / name, text)
    for name in port.counters:
        _write(base / "counters" / name, str(port.counter_value(name, node.epoch)))
    for name, counter in port.hw_counters.items():
        _write(base / "hw_counters" / name, str(counter.value(node.epoch)))


def _write_netdev(hca: SimHca, port: SimIbPort, function: Path, root: Path) -> None:
    base = function / "net" / port.netdev
    ib = port.link_layer == "InfiniBand"
    up = port.netdev_operstate == "up"
    _write(base / "operstate", port.netdev_operstate)
    _write(base / "mtu", str(port.mtu))
    _write(base / "type", "32" if ib else "1")
    _write(base / "flags", "0x1003" if up else "0x1002")
    _write(base / "carrier", "1" if up else "0")
    _write(base / "speed", str(int(port.width * 1000 * LANE_GBPS[port.speed])) if up else "-1")
    _write(base / "dev_port", str(port.port - 1))
    if not ib:  # mlx5's DCQCN switches, one file per priority
        for point, enabled in (("roce_np", port.ecn_np), ("roce_rp", port.ecn_rp)):
            for prio in range(8):
                _write(base / "ecn" / point / "enable" / str(prio),
                       "1" if prio in enabled else "0")
    _link(base / "device", function)
    _link(root / "sys/class/net" / port.netdev, base)


def write_ib_tree(node: SimNode, root: Path, pci: PciTree) -> None:
    """Every HCA's PCI function, RDMA device, ports and netdevs; plus the host's
    management Ethernet port and loopback, which every real node has."""
    cpulists = node.layout.host.cpulists
    for hca in node.hcas:
        eth = all(p.link_layer == "Ethernet" for p in hca.ports)
        function = pci.add(hca_bridges(node, hca), hca.pci_bdf, "0x15b3", hca.device_id,
                           _ETH_CLASS if eth else _IB_CLASS, hca.numa,
                           cpulists[hca.numa % len(cpulists)], hca.pcie_gen, hca.pcie_width,
                           "mlx5_core", hca.max_pcie_gen, hca.max_pcie_width)
        if hca.vpd is not None:
            (function / "vpd").write_bytes(encode_vpd(hca.vpd))
        for port in hca.ports:
            # An IPoIB netdev exists only on top of a registered RDMA device.
            if hca.present or port.link_layer == "Ethernet":
                _write_netdev(hca, port, function, root)
        if not hca.present:
            continue
        device = function / "infiniband" / hca.name
        for name, text in (("fw_ver", hca.fw_ver), ("node_guid", hca.node_guid),
                           ("sys_image_guid", hca.node_guid), ("hca_type", hca.hca_type),
                           ("board_id", hca.board_id), ("node_desc", hca.node_desc),
                           ("node_type", "1: CA"), ("hw_rev", "0x0")):
            _write(device / name, text)
        _link(device / "device", function)
        for port in hca.ports:
            _write_port(node, hca, port, device / "ports" / str(port.port))
        _link(root / "sys/class/infiniband" / hca.name, device)
    mgmt = pci.add(["0000:00:1c.0"], "0000:01:00.0", "0x8086", "0x1533", _ETH_CLASS, 0,
                   cpulists[0], 3, 1, "igb")
    _write_mgmt(mgmt / "net/eno3", root, mgmt)
    lo = root / "sys/devices/virtual/net/lo"
    for name, text in (("operstate", "unknown"), ("mtu", "65536"), ("type", "772"),
                       ("flags", "0x9"), ("carrier", "1")):
        _write(lo / name, text)
    _link(root / "sys/class/net/lo", lo)


def _write_mgmt(base: Path, root: Path, function: Path) -> None:
    for name, text in (("operstate", "up"), ("mtu", "1500"), ("type", "1"),
                       ("flags", "0x1003"), ("carrier", "1"), ("speed", "1000")):
        _write(base / name, text)
    _link(base / "device", function)
    _link(root / "sys/class/net" / base.name, base)


def refresh_counters(node: SimNode, root: Path) -> None:
    """Rewrite the counter files whose simulated counter moves, as of now."""
    for hca in node.hcas:
        if not hca.present:
            continue
        for port in hca.ports:
            base = root / "sys/class/infiniband" / hca.name / "ports" / str(port.port)
            for name, counter in port.counters.items():
                if counter.rate_per_s:
                    _write(base / "counters" / name, str(port.counter_value(name, node.epoch)))
            for name, counter in port.hw_counters.items():
                if counter.rate_per_s:
                    _write(base / "hw_counters" / name, str(counter.value(node.epoch)))
