"""The node's own commands a qualification asks before its tests: ``ibstat`` (rdma-core
infiniband-diags 44.0, Debian bookworm's), ``nvidia-smi`` (``--query-gpu``, ``-L``,
``topo -m``), ``which``, ``readlink`` and ``ls``.

``ibstat`` lists the CAs sorted by ``strcmp`` of their names, as rdma-core sorts them
(ibstat.c:312 calls umad_sort_ca_device_list, libibumad/umad.c:555-558 compares with strcmp,
@ v44.0): mlx5_0, mlx5_1, mlx5_10, mlx5_11, mlx5_2, ... — the order of the real captures
(tests/fixtures/real/ib/ibstat_gpud_*.txt); print order says nothing of where a NIC sits.
Each CA and port as ca_dump/port_dump print them (ibstat.c:60-78, 161-194); no device at
all prints nothing and exits 0 (research runs/ibstat_nodev.txt).

``nvidia-smi topo -m`` is laid out as the real captures of driver 590 are
(tests/fixtures/topo/, and reports/render/topo.py renders the same layout from a snapshot;
the simulator may not import the reports, so the few lines are here, from the simulated
node's PCIe tree): tab-separated cells, `` X `` for self, CPU and NUMA affinity and
``GPU NUMA ID`` after the GPU cells, the legend, the NIC legend. NICs come in PCI address
order, which on the real captures is also their name order (mlx5_0 ... mlx5_11).
"""

from __future__ import annotations

from collections.abc import Collection

from ...checks.core.topology import LEGEND, pci_distance
from ..model.pci import PciDevice
from . import bandwidth as bw
from .state.hardware import REMOTE_SWITCH, SimGpu, SimNode
from .state.ib import LANE_GBPS, PHYS_STATES, SimHca, SimIbPort
from .state.pci import gpu_bridges, hca_bridges
from .toolkit import INSTALLED, NotModelled, Printed, resolve

IBSTAT_VERSION = "44.0"  # research runs/ibstat_V.txt
_PORT_STATES = {"DOWN": "Down", "INIT": "Initializing", "ARMED": "Armed", "ACTIVE": "Active"}
# port_phy_state_str (ibstat.c:89-98), by the state's number.
_PHYS = ("No state change", "Sleep", "Polling", "Disabled", "PortConfigurationTraining",
         "LinkUp", "LinkErrorRecovery", "PhyTest")
# Capability masks of the real ConnectX-7 captures: InfiniBand ports
# (ibstat_gpud_some_down_0.txt), Ethernet ports (ibstat_gpud_h100_8x400G_plus_eth_*.txt).
_CAPABILITY = {"InfiniBand": 0xA751E848, "Ethernet": 0x00010000}


def _guid(hca: SimHca) -> int:
    return int(hca.node_guid.replace(":", ""), 16)


def port_guid(hca: SimHca, port: SimIbPort) -> int:
    """An InfiniBand port's GUID is the node's; a RoCE port's is the EUI-64 of its MAC
    (the real captures: node 0xa088c20300e3142a, Ethernet port 0xa288c2fffee3142a)."""
    node = _guid(hca)
    if port.link_layer == "InfiniBand":
        return node
    raw = bytearray(node.to_bytes(8, "big"))
    raw[0] ^= 0x02
    raw[3:5] = b"\xff\xfe"
    return int.from_bytes(raw, "big")


def _port(hca: SimHca, port: SimIbPort, pre: str) -> list[str]:
    """port_dump (ibstat.c:161-194); ``pre`` is two tabs in a CA's listing, none alone."""
    ethernet = port.link_layer == "Ethernet"
    rate = port.width * LANE_GBPS[port.speed]
    rate_text = "2.5" if rate == 2.5 else f"{int(rate)}" + (" (FDR10)" if port.speed == "FDR10"
                                                            else "")
    return [f"{pre}State: {_PORT_STATES.get(port.state, '???')}",
            f"{pre}Physical state: {_PHYS[PHYS_STATES.get(port.phys_state, 0)]}",
            f"{pre}Rate: {rate_text}",
            f"{pre}Base lid: {0 if ethernet else port.lid}", f"{pre}LMC: 0",
            f"{pre}SM lid: {0 if ethernet else port.sm_lid}",
            f"{pre}Capability mask: 0x{_CAPABILITY[port.link_layer]:08x}",
            f"{pre}Port GUID: 0x{port_guid(hca, port):016x}",
            f"{pre}Link layer: {port.link_layer}"]


def _ca(hca: SimHca, ports: bool) -> list[str]:
    """ca_dump (ibstat.c:60-78) and, unless -s, every port."""
    guid = f"0x{_guid(hca):016x}"
    lines = [f"CA '{hca.name}'", f"\tCA type: {hca.hca_type}",
             f"\tNumber of ports: {len(hca.ports)}", f"\tFirmware version: {hca.fw_ver}",
             "\tHardware version: 0", f"\tNode GUID: {guid}", f"\tSystem image GUID: {guid}"]
    if ports:
        for port in hca.ports:
            lines += [f"\tPort {port.port}:", *_port(hca, port, "\t\t")]
    return lines


def ibstat(node: SimNode, argv: list[str], pid: int) -> Printed:
    """ibstat [-l|-s|-p|-V] [ca [port]] (ibstat.c main, @ v44.0:283-345)."""
    flags = [a for a in argv[1:] if a.startswith("-")]
    names = [a for a in argv[1:] if not a.startswith("-")]
    if any(f not in ("-l", "-s", "-p", "-V") for f in flags):
        raise NotModelled(f"ibstat {' '.join(flags)} is not simulated")
    if "-V" in flags:
        return Printed(f"ibstat BUILD VERSION: {IBSTAT_VERSION}\n")
    cas = sorted((h for h in node.hcas if h.present), key=lambda h: h.name.encode())
    if names:
        chosen = [h for h in cas if h.name == names[0]]
        if not chosen:  # IBPANIC (ibdiag_common: "ibpanic: [pid] func: msg: strerror")
            return Printed("", f"ibpanic: [{pid}] main: '{names[0]}' IB device can't be found: "
                               "Success\n", 255)
        cas = chosen
    if "-l" in flags:
        return Printed("".join(f"{h.name}\n" for h in cas))
    if "-p" in flags:
        return Printed("".join(f"0x{port_guid(h, p):016x}\n" for h in cas for p in h.ports))
    if len(names) > 1:  # one port, alone: ca_stat's "CA: 'name'" and port_dump(port, 1)
        port = next((p for p in cas[0].ports if p.port == int(names[1])), None)
        if port is None:
            raise NotModelled(f"ibstat {names[0]} {names[1]}: no such port (not simulated)")
        return Printed("\n".join([f"CA: '{cas[0].name}'", f"Port {port.port}:",
                                  *_port(cas[0], port, "")]) + "\n")
    lines = [line for h in cas for line in _ca(h, "-s" not in flags)]
    return Printed("\n".join(lines) + "\n" if lines else "")


def _gpu_device(node: SimNode, gpu: SimGpu) -> PciDevice:
    return PciDevice(gpu.bdf, 0x10DE, node.layout.gpu_device_id, 0x030200, numa_node=gpu.numa,
                     path=[*gpu_bridges(node, gpu), gpu.bdf])


def _hca_device(node: SimNode, hca: SimHca) -> PciDevice:
    return PciDevice(hca.pci_bdf, 0x15B3, int(hca.device_id, 16), 0x020700,
                     numa_node=hca.numa, path=[*hca_bridges(node, hca), hca.pci_bdf])


def _nvlinks(gpu: SimGpu) -> int:
    return sum(1 for link in gpu.links if link.state == 1 and link.remote_type == REMOTE_SWITCH)


def topo(node: SimNode) -> str:
    """``nvidia-smi topo -m`` of the node (driver 590 layout)."""
    gpus = [g for g in node.gpus if g.in_nvml]
    hcas = sorted((h for h in node.hcas if h.present), key=lambda h: h.pci_bdf)
    devices = [_gpu_device(node, g) for g in gpus] + [_hca_device(node, h) for h in hcas]
    labels = [f"GPU{i}" for i in range(len(gpus))] + [f"NIC{i}" for i in range(len(hcas))]

    def cell(a: int, b: int) -> str:
        if a == b:
            return " X "
        if a < len(gpus) and b < len(gpus):
            links = min(_nvlinks(gpus[a]), _nvlinks(gpus[b]))
            if links:
                return f"NV{links}"
        return pci_distance(devices[a], devices[b])

    every = range(len(labels))
    lines = ["\t" + "\t".join([*labels, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"])]
    for a, gpu in enumerate(gpus):
        cpus = node.layout.host.cpulists[gpu.numa] if gpu.numa < len(
            node.layout.host.cpulists) else "N/A"
        lines.append("\t".join([labels[a], *(cell(a, b) for b in every), cpus, str(gpu.numa),
                                "", "N/A"]))
    for a in range(len(gpus), len(labels)):
        lines.append("\t".join([labels[a], *(cell(a, b) for b in every)]))
    lines += ["", "Legend:", "", *LEGEND]
    if hcas:
        lines += ["", "NIC Legend:", "", *(f"  NIC{i}: {h.name}" for i, h in enumerate(hcas))]
    return "\n".join(lines) + "\n"


def nvidia_smi(node: SimNode, argv: list[str]) -> Printed:
    """The forms a qualification uses; any other is refused as not simulated."""
    args = argv[1:]
    if args == ["--query-gpu=index,pci.bus_id", "--format=csv,noheader"]:
        return Printed("".join(f"{g.index}, {g.bdf.upper().replace('0000:', '00000000:', 1)}\n"
                               for g in node.gpus if g.in_nvml))
    if args == ["-L"]:  # the lines gpu-burn's system("nvidia-smi -L") prints (capture 06)
        return Printed("".join(f"GPU {g.index}: {g.name} (UUID: {g.uuid})\n"
                               for g in node.gpus if g.in_nvml))
    if args == ["topo", "-m"]:
        return Printed(topo(node))
    raise NotModelled(f"nvidia-smi {' '.join(args)} is not simulated")


def which(argv: list[str], installed: Collection[str]) -> Printed:
    """Debian's which: each found program's path, nothing for a missing one, exit 1 if
    any was missing."""
    names = [a for a in argv[1:] if not a.startswith("-")]
    found = [INSTALLED[n][0] for n in names if n in INSTALLED and n in installed]
    return Printed("".join(f"{p}\n" for p in found), "", 0 if len(found) == len(names) else 1)


def readlink(argv: list[str], installed: Collection[str]) -> Printed:
    """``readlink -f|-e PATH``: where a tool's path leads; nothing and exit 1 where there
    is no such file."""
    flags = [a for a in argv[1:] if a.startswith("-")]
    paths = [a for a in argv[1:] if not a.startswith("-")]
    if flags not in (["-f"], ["-e"]) or len(paths) != 1:
        raise NotModelled(f"readlink {' '.join(argv[1:])} is not simulated")
    target = resolve(paths[0])
    tool = next((n for n, (link, real) in INSTALLED.items() if target in (link, real)), None)
    if target is None or (tool is not None and tool not in installed) or (
            tool is None and "gpu_burn" not in installed):
        return Printed("", "", 1)
    return Printed(f"{target}\n")


def imex_ls(node: SimNode, path: str, channels: str) -> Printed:
    """``ls`` of the IMEX channel directory (the only path qualify lists)."""
    if path.rstrip("/") == channels and bw.imex_channel(node):
        return Printed("channel0\n")
    return Printed("", f"ls: cannot access '{path}': No such file or directory\n", 2)
