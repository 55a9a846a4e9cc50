"""The bandwidth model behind the simulated active-test tools.

Each platform has the rates its parts reach when healthy — per-GPU compute and HBM, the
host link (PCIe or NVLink-C2C), per-GPU NVLink through the NVSwitches, the NVLink SHARP
all-reduce ceiling, the NVL72 domain, the per-rail NIC — taken from the published
measurements each profile's ``qualify`` figures cite in their ``source`` (noted
below) and from the part's line rate times a typical efficiency where there are none.
Faults scale one part (``SimNode.slow``); every figure a tool prints is composed from the
parts it crosses, so a slow NVLink slows the pairs of its GPU and every all-reduce ring,
and nothing else. Run-to-run noise is Gaussian, seeded per (node, test, component, run),
σ = 1 %, so relative detection is tested against noise like a real fleet's.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass

from .state.hardware import SimNode

SIGMA = 0.01
SOCKET_BUSBW = 5.0  # GB/s: what users measured once NCCL fell back to sockets


@dataclass(frozen=True)
class Rates:
    gflops: float  # gpu_burn FP64 Gflop/s per GPU
    # nvbandwidth device_local_copy, GB/s as it prints it: a copy rate, bytes copied once
    # per second (memcpy.cpp:483), half the read+write traffic (NVIDIA/nvbandwidth#48).
    hbm: float
    host: float  # host<->device copy engine, GB/s
    nvlink: float  # one GPU to another, unidirectional copy engine read, GB/s
    ring_eff: float  # ring all-reduce busbw / nvlink (NCCL_ALGO=Ring)
    nvls: float  # all-reduce busbw with NVLink SHARP (0: no NVLS, the default is the ring)
    nic: float  # GPUDirect RDMA per rail, Gb/s
    mnnvl: float = 0.0  # rack-wide all-reduce busbw over multi-node NVLink (NVL72)
    single: float = 0.0  # gpu_burn in TF32 (-tc without -d) Gflop/s; 0: twice ``gflops``


# Sources: A100 gflops 16.9-17.2 TF (outputs/06), HBM 1.61 TB/s (Azure
# BabelStream), host 26.28 (Azure), d2d 276 (nvbandwidth README), all-reduce 231.6 (Azure);
# H100 HBM 2.90 TB/s, host 51-52, NVLS 480 and ring 370 (nccl-tests #212); H200 HBM 4.01,
# NVLS 480; B200 HBM 5.43-5.87 (DCGM); B300 ring/NVLS 695/845 (nccl #2140); GB200 d2d ~770
# (Azure guide #7), rack 846.8 (coreweave PR #43); NIC: line rate x 0.98 (AzNHC floors at
# 0.9-0.95). Compute of Hopper/Blackwell: FP64 tensor-core datasheet figure x 0.8 (no
# published gpu_burn capture). The HBM figures above count every byte read and written
# (BabelStream Copy); nvbandwidth's device_local_copy counts each copied byte once
# (memcpy.cpp:483 adjustedCopySizes x loops / time; testcases_ce.cpp:214-223, one
# memcpy per GPU), which its maintainer puts at half the read+write figure
# (NVIDIA/nvbandwidth#48: 1.1 TB/s printed is ~2.2 TB/s of memory traffic): hbm is half.
RATES: dict[str, Rates] = {
    "dgx-a100": Rates(17000, 1610 / 2, 26.3, 276, 0.84, 0, 196),
    "dgx-h100": Rates(53600, 2900 / 2, 52, 370, 1.0, 480, 392),
    "dgx-h200": Rates(53600, 4010 / 2, 52, 370, 1.0, 480, 392),
    "dgx-b200": Rates(32000, 5600 / 2, 52, 740, 0.94, 845, 392),
    "gb200-nvl72": Rates(36000, 5600 / 2, 346, 770, 0.9, 0, 392, 846.8),
    # GB300: FP64 1.25 TF; TF32 1.25 PF dense x 0.6 achieved (ours) for gpu_burn -tc.
    "gb300-nvl72": Rates(1250, 6000 / 2, 346, 770, 0.9, 0, 784, 846.8, 750_000),
    "hgx-h100-pcie": Rates(41000, 1900 / 2, 52, 0, 0.8, 0, 392),
    # H100 NVL (product brief): FP64 tensor 60 TF x 0.8; HBM 3.9 TB/s at the H100 SXM's
    # measured share of its datasheet (2.90 of 3.35) -> 3.38; NVLink bridge 600 GB/s both
    # ways -> 300 one way at the same share; no NVLS without NVSwitch.
    "h100-nvl": Rates(48000, 3380 / 2, 52, 260, 0.8, 0, 392),
    # HGX B300: the GB300 tray's GPU figures, B300 ring/NVLS 695/845 (nccl #2140).
    "hgx-b300-8gpu": Rates(1250, 6000 / 2, 52, 740, 0.94, 845, 784, 0, 750_000),
}
_DEFAULT = Rates(10000, 1000 / 2, 25, 0, 0.8, 0, 100)


def rates(node: SimNode) -> Rates:
    return RATES.get(node.profile.name, _DEFAULT)


def noise(seed: int, *where: object) -> float:
    """A factor near 1, the same for the same seed and place, different for each run."""
    digest = hashlib.sha256(repr((seed, *where)).encode()).digest()
    value = random.Random(int.from_bytes(digest[:8], "big")).gauss(1.0, SIGMA)
    return min(max(value, 1 - 3 * SIGMA), 1 + 3 * SIGMA)


def factor(node: SimNode, part: str, index: int | str) -> float:
    return node.slow.get(f"{part}:{index}", 1.0)


def gpu_gflops(node: SimNode, gpu: int, doubles: bool = True) -> float:
    own = rates(node)
    rate = own.gflops if doubles else own.single or 2 * own.gflops
    return rate * factor(node, "compute", gpu)


def hbm(node: SimNode, gpu: int) -> float:
    return rates(node).hbm * factor(node, "hbm", gpu)


def host_link(node: SimNode, gpu: int) -> float:
    return rates(node).host * factor(node, "pcie", gpu)


def p2p(node: SimNode, a: int, b: int) -> float:
    """GPU a to GPU b: NVLink through the switches (or PCIe peer-to-peer without NVLink),
    as fast as the slower of the two GPUs' links."""
    r = rates(node)
    if r.nvlink:
        return r.nvlink * min(factor(node, "nvlink", a), factor(node, "nvlink", b))
    return 0.8 * min(host_link(node, a), host_link(node, b))


def slowest_nvlink(node: SimNode) -> float:
    return min((factor(node, "nvlink", g.index) for g in node.gpus), default=1.0)


def allreduce_busbw(node: SimNode, algo: str, through_nics: bool) -> float:
    """Local all-reduce over every GPU: a ring is as fast as its slowest link; NVLS is
    capped by the switches and slowed by the slowest GPU's links too. With P2P and SHM
    off the traffic crosses the NICs, one per GPU, so the slowest rail bounds it."""
    r = rates(node)
    if through_nics:
        if node.socket_fallback:
            return SOCKET_BUSBW
        rails = [nic_gbps(node, hca) for hca in compute_hcas(node)]
        return 0.9 * min(rails) / 8 if rails else SOCKET_BUSBW
    if not r.nvlink:
        return r.ring_eff * min(p2p(node, a.index, b.index) for a in node.gpus
                                for b in node.gpus if a.index != b.index)
    ring = r.nvlink * r.ring_eff * slowest_nvlink(node)
    if algo.lower() == "ring" or not r.nvls:
        return ring
    return r.nvls * slowest_nvlink(node)


def compute_hcas(node: SimNode) -> list[str]:
    return [h.name for h in node.hcas if h.role == "compute" and h.present]


def nic_gbps(node: SimNode, hca: str) -> float:
    return rates(node).nic * factor(node, "rail", hca)


def rack_busbw(trays: list[SimNode]) -> float:
    """All-reduce over every GPU of an NVL72 rack: the slowest tray's NVLinks bound it."""
    if not trays:
        return 0.0
    return rates(trays[0]).mnnvl * min(slowest_nvlink(t) for t in trays)


# Across nodes. A flat ring's busbw is bounded by each node's NICs: "46-48 GB/s per NIC"
# at NDR (nccl-tests #290, AddyLaddy), i.e. 0.94 of the rail's 392 Gb/s here, times the
# rails; a rail's cable or switch port (``cable:<hca>``) slows only traffic that leaves
# the node, never the same-host loopback. Each of the ring's 2(n-1) network steps costs
# RING_STEP_US (NCCL's Simple protocol, a few microseconds per hop), which is why a ring
# loses efficiency at thousands of nodes at a fixed message size (248 H200 nodes ~350 of
# ~370 GB/s, nccl-tests #283). Tree pays 2·log2(n) steps instead; on exactly two nodes
# NCCL's default (NVLSTree) goes beyond the network (440.6 vs ~370, coreweave PR #92).
RING_STEP_US = 5.0
NET_EFF = 0.94
TWO_NODE_TREE_GAIN = 1.19


def cross_rail_gbps(node: SimNode, hca: str) -> float:
    return nic_gbps(node, hca) * factor(node, "cable", hca)


def network_busbw(node: SimNode) -> float:
    """The node's share of a cross-node ring: its slowest rail times the rails, times
    ``network:0`` where the node's whole way out is slow (not one rail's cable: its PCIe
    switches to the NICs, its GPUDirect path), which a same-rail perftest pair of ports
    under the same PCIe switch does not cross."""
    if node.socket_fallback:
        return SOCKET_BUSBW
    rails = [cross_rail_gbps(node, hca) for hca in compute_hcas(node)]
    share = NET_EFF * min(rails) / 8 * len(rails) if rails else SOCKET_BUSBW
    return share * factor(node, "network", 0)


def _steps(nodes: int, algo: str) -> float:
    if algo.lower() == "ring":
        return 2.0 * (nodes - 1)
    return 2.0 * math.ceil(math.log2(max(nodes, 2)))


def group_bandwidth(nodes: list[SimNode], algo: str) -> float:
    """The bandwidth part of an all-reduce over ``nodes`` (GB/s of busbw): the slowest
    node's local ring and network share, the spine where the group spans racks."""
    local = min(allreduce_busbw(n, "ring", False) for n in nodes)
    band = min(local, *(network_busbw(n) for n in nodes))
    if len({n.rack for n in nodes}) > 1:
        band *= min(factor(n, "uplink", 0) for n in nodes)
    if algo.lower() != "ring" and len(nodes) == 2 and not any(n.socket_fallback
                                                              for n in nodes):
        band *= TWO_NODE_TREE_GAIN
    return band


def group_busbw(nodes: list[SimNode], algo: str, size: int, band: float) -> float:
    """busbw at ``size`` bytes: the bandwidth part slowed by the algorithm's steps."""
    ranks = sum(len(n.gpus) for n in nodes)
    moved = size * 2 * (ranks - 1) / ranks
    seconds = moved / (band * 1e9) + _steps(len(nodes), algo) * RING_STEP_US * 1e-6
    return moved / seconds / 1e9


def imex_channel(node: SimNode) -> bool:
    return node.profile.imex and node.imex_channel


def mnnvl_busbw(trays: list[SimNode]) -> float:
    """All-reduce over every GPU of ``trays`` over multi-node NVLink: the rack figure
    (846.8 GB/s over 72 GPUs, coreweave PR #43) bound by the slowest tray's NVLinks and
    its path into the NVLink switch trays (``mnnvl:0``)."""
    return rack_busbw(trays) * min(factor(t, "mnnvl", 0) for t in trays)
