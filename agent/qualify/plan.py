"""Which tool runs for which node test, with which arguments, environment and deadline.

The arguments follow what the peers that publish thresholds run (AzNHC, GCM, SuperBench,
cluster-health-scanner): all_reduce_perf over every local GPU in one process, 1 GiB to 8 GiB
(the NVLS curve still rises below 1 GiB, nccl-tests#212), with the default algorithm, with
``NCCL_ALGO=Ring`` (the plain NVLink path), and with P2P and SHM off so the traffic goes
through the node's own NICs (AzNHC's ``ib_loopback``; ``NCCL_DEBUG=INFO`` shows which
network NCCL chose); nvbandwidth's CE copies host↔device, device↔device and
``device_local_copy``; ``ib_write_bw --use_cuda`` same-host loopback per compute rail, 8 MiB
messages, ``--report_gbits`` (AzNHC's GDR check); ``gpu_burn`` with doubles and tensor
cores (or, without gpu_burn, DCGM's FP64 ``diagnostic`` test); ``dcgmi diag -r 2|3 -j``
where DCGM is installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...checks.core.levels import Level

# How to get each tool: what a skipped test says.
INSTALL = {
    "all_reduce_perf": "build nccl-tests (github.com/NVIDIA/nccl-tests, `make`) and put "
                       "build/ on PATH, or set qualify.tools.all_reduce_perf",
    "nvbandwidth": "build nvbandwidth (github.com/NVIDIA/nvbandwidth) or set "
                   "qualify.tools.nvbandwidth",
    "ib_write_bw": "install perftest built with CUDA (apt install perftest; --use_cuda needs "
                   "a CUDA build) or set qualify.tools.ib_write_bw",
    "gpu_burn": "build gpu-burn (github.com/wilicc/gpu-burn) or set qualify.tools.gpu_burn",
    "dcgmi": "install DCGM (datacenter-gpu-manager) and start nv-hostengine",
}
NODE_TESTS = ("allreduce", "allreduce_ring", "allreduce_net", "nvbandwidth", "gpu_compute",
              "nic", "dcgm")
DEADLINES = {"allreduce": 300.0, "allreduce_ring": 300.0, "allreduce_net": 300.0,
             "nvbandwidth": 300.0, "gpu_compute": 120.0, "nic": 120.0, "dcgm": 1800.0,
             "inventory": 30.0}
NVBANDWIDTH_CASES = ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce",
                     "device_to_device_memcpy_read_ce", "device_local_copy")
NIC_PORT_BASE = 18515  # AzNHC runs its 8 loopbacks on 18510-18517


@dataclass(frozen=True)
class Rail:
    hca: str
    port: int
    gpu: int


@dataclass
class Inventory:
    gpus: list[int] = field(default_factory=list)
    rails: list[Rail] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Step:
    test: str
    tool: str  # the parser: nccl-tests, nvbandwidth, perftest, gpu_burn, dcgmi
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    deadline_s: float = 300.0
    server_argv: tuple[str, ...] | None = None  # loopback: the server half, same node
    component: str = "node"
    fallback: Step | None = None  # run instead when this one's tool is not installed


def program(name: str, tools: Mapping[str, Any]) -> str:
    return str(tools.get(name) or name)


def node_steps(inventory: Inventory, level: Level, settings: Mapping[str, Any],
               tests: frozenset[str]) -> list[Step]:
    """The node's steps, in the order they run (one at a time: they share the GPUs)."""
    tools = settings.get("tools") or {}
    deadlines = {**DEADLINES, **(settings.get("deadline_s") or {})}
    gpus = len(inventory.gpus)
    iters = "100" if level == Level.FULL else "20"
    steps: list[Step] = []
    allreduce = (program("all_reduce_perf", tools), "-b", "1G", "-e", "8G", "-f", "2",
                 "-g", str(gpus), "-w", "5", "-n", iters)
    variants = {"allreduce": (), "allreduce_ring": (("NCCL_ALGO", "Ring"),),
                "allreduce_net": (("NCCL_P2P_DISABLE", "1"), ("NCCL_SHM_DISABLE", "1"),
                                  ("NCCL_NET_GDR_LEVEL", "5"), ("NCCL_DEBUG", "INFO"),
                                  ("NCCL_DEBUG_SUBSYS", "INIT,NET"))}
    for test, env in variants.items():
        if test in tests and gpus and (test != "allreduce_net" or inventory.rails):
            steps.append(Step(test, "nccl-tests", allreduce, env, float(deadlines[test])))
    if "nvbandwidth" in tests and gpus:
        steps.append(Step("nvbandwidth", "nvbandwidth",
                          (program("nvbandwidth", tools), "-t", *NVBANDWIDTH_CASES),
                          deadline_s=float(deadlines["nvbandwidth"])))
    if "gpu_compute" in tests and gpus:
        burn = str(int(float(settings.get("burn_s", 30.0)) * (4 if level == Level.FULL else 1)))
        dcgm = Step("gpu_compute", "dcgmi", (program("dcgmi", tools), "diag", "-r",
                                             "diagnostic", "-j"),
                    deadline_s=float(deadlines["dcgm"]))
        steps.append(Step("gpu_compute", "gpu_burn",
                          (program("gpu_burn", tools), "-d", "-tc", burn),
                          deadline_s=float(deadlines["gpu_compute"]) + float(burn),
                          fallback=dcgm))
    if "nic" in tests:
        for i, rail in enumerate(inventory.rails):
            common = (program("ib_write_bw", tools), "-d", rail.hca, "-i", str(rail.port),
                      f"--use_cuda={rail.gpu}", "-s", "8388608", "-n", "2000", "-F",
                      "--report_gbits", "-p", str(NIC_PORT_BASE + i))
            steps.append(Step("nic", "perftest", (*common, "localhost"),
                              deadline_s=float(deadlines["nic"]), server_argv=common,
                              component=f"{rail.hca}/{rail.port}"))
    if "dcgm" in tests and gpus:
        steps.append(Step("dcgm", "dcgmi", (program("dcgmi", tools), "diag", "-r",
                                            "3" if level == Level.FULL else "2", "-j"),
                          deadline_s=float(deadlines["dcgm"])))
    return steps


def parse_gpus(text: str) -> list[int]:
    """``nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader``."""
    return [int(line.split(",")[0]) for line in text.splitlines()
            if line.split(",")[0].strip().isdigit()]


def parse_ibstat(text: str, gpus: list[int], pinned: Mapping[str, Any]) -> list[Rail]:
    """Compute rails from ``ibstat``: every active InfiniBand port (docs/design.md §7: compute HCAs
    are InfiniBand; storage and management ports are Ethernet). Rail k uses GPU k's memory
    unless ``qualify.rails`` pins the HCA to a GPU."""
    rails: list[Rail] = []
    hca, port, state = "", 0, ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("CA '"):
            hca = stripped[4:].rstrip("'")
        elif stripped.startswith("Port ") and stripped.endswith(":"):
            port = int(stripped[5:-1]) if stripped[5:-1].isdigit() else 0
        elif stripped.startswith("State:"):
            state = stripped.split(":", 1)[1].strip()
        elif stripped.startswith("Link layer:") and stripped.endswith("InfiniBand") \
                and state == "Active" and hca and port:
            rails.append(Rail(hca, port, -1))
    out = []
    for k, rail in enumerate(rails):
        gpu = pinned.get(rail.hca)
        if not isinstance(gpu, int):
            gpu = gpus[k % len(gpus)] if gpus else 0
        out.append(Rail(rail.hca, rail.port, gpu))
    return out
