"""What a node has for its active tests, asked of the node itself before any test runs: its
GPUs, its compute rails and the GPU nearest each, whether its perftest can use GPU memory,
and where gpu-burn's compare kernel is.

Ports come from ``ibstat`` (its active InfiniBand ports), but never their GPUs: ibstat lists
CAs sorted by name with ``strcmp`` (rdma-core libibumad umad.c ``umad_sort_ca_device_list``,
called by ibstat.c), so mlx5_10 comes before mlx5_2 and print order says nothing of where a
NIC sits. Each rail's GPU is the one ``nvidia-smi topo -m`` puts nearest it (PIX, then PXB,
PHB, NODE), as NCCL pairs them, unless ``qualify.rails`` pins it. Where some ports share a
PCIe switch with a GPU (PIX or PXB: a DGX's or HGX's compute NICs, one per GPU), only those
are compute rails; the others (a DGX H100's storage and management ports, which hang off
the CPU's root ports) are left out and named in the report. A NIC no GPU is nearer than
SYS to, or a node whose topology could not be read, runs its test in host memory and the
report says so. RoCE ports are not tested: perftest would need each one's RoCE v2 GID
index (``-x``), which is not chosen yet.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..read.sources import CommandResult
from .launch import ToolRunner

# nvidia-smi topo -m's classes, nearest first (its own legend); SYS crosses the sockets.
NEAR = ("PIX", "PXB", "PHB", "NODE")
# gpu_burn matches -h, -l, -d and -tc anywhere in any argument and -m, -i, -c, -s at the
# start (gpu_burn-drv.cpp:826-906): a compare file's path holding one is read as that option.
_GPU_BURN_TRAPS = ("-h", "-l", "-d", "-tc")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+):\s*(\S+)\s*$")


@dataclass(frozen=True)
class Rail:
    hca: str
    port: int
    gpu: int | None  # the GPU whose memory its test uses; None: host memory
    why: str = ""  # how the GPU was chosen, or why there is none


@dataclass
class Inventory:
    gpus: list[int] = field(default_factory=list)
    rails: list[Rail] = field(default_factory=list)
    perftest_cuda: bool | None = None  # None: not asked (no RDMA test planned) or unknown
    gpu_burn_compare: str | None = None
    problems: list[str] = field(default_factory=list)  # what could not be asked
    notes: list[str] = field(default_factory=list)  # what the report says of how tests ran


def parse_gpus(text: str) -> list[int]:
    """``nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader``."""
    return [int(line.split(",")[0]) for line in text.splitlines()
            if line.split(",")[0].strip().isdigit()]


def parse_ibstat(text: str) -> list[tuple[str, int]]:
    """(CA, port) of every active InfiniBand port, in the order ibstat prints them."""
    found: list[tuple[str, int]] = []
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
            found.append((hca, port))
    return found


def parse_topo(text: str) -> dict[str, dict[int, str]]:
    """``nvidia-smi topo -m``: each NIC (by its device name, from the NIC legend) and its
    class to every GPU (``{"mlx5_0": {0: "PIX", 1: "PXB", ...}}``); ANSI escapes (a
    terminal's underlined header) are ignored."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in text.splitlines()]
    # The header names the columns from GPU0 on; GPU0's own row follows with "X" (itself).
    header = next((words for words in map(str.split, lines)
                   if len(words) > 1 and words[0] == "GPU0" and words[1] != "X"), [])
    labels = [w for w in header if re.fullmatch(r"(GPU|NIC)\d+", w)]
    names = {m.group(1): m.group(2) for line in lines if (m := _NIC_LEGEND.match(line))}
    out: dict[str, dict[int, str]] = {}
    for line in lines:
        words = line.split()
        if not words or not re.fullmatch(r"NIC\d+", words[0]) or words[0] not in labels:
            continue
        cells = dict(zip(labels, words[1:1 + len(labels)], strict=False))
        out[names.get(words[0], words[0])] = {
            int(label[3:]): cell for label, cell in cells.items() if label.startswith("GPU")}
    return out


# A NIC sharing a PCIe switch with a GPU: a compute rail (GPUDirect RDMA's own criterion:
# NCCL uses GPU Direct RDMA up to PXB by default, NCCL_NET_GDR_LEVEL in NCCL's env docs).
_COMPUTE = ("PIX", "PXB")


def compute_ports(ports: list[tuple[str, int]], topo: Mapping[str, Mapping[int, str]] | None,
                  pinned: Mapping[str, Any]) -> tuple[list[tuple[str, int]], list[str]]:
    """The ports that are compute rails, and a note per port left out: where the topology
    shows ports under a GPU's PCIe switch, those (and any pinned in ``qualify.rails``);
    else every port."""
    near = {hca for hca, classes in (topo or {}).items()
            if any(c in _COMPUTE for c in classes.values())}
    if not near:
        return ports, []
    kept = [(h, p) for h, p in ports if h in near or h in pinned]
    notes = [f"{h}/{p}: no GPU under its PCIe switch (nearest "
             f"{_nearest((topo or {}).get(h, {}))}): a storage or management port, not tested"
             for h, p in ports if (h, p) not in kept]
    return kept, notes


def _nearest(classes: Mapping[int, str]) -> str:
    ranked = sorted(classes.values(), key=lambda c: NEAR.index(c) if c in NEAR else len(NEAR))
    return ranked[0] if ranked else "unknown"


def pair_rails(ports: list[tuple[str, int]], topo: Mapping[str, Mapping[int, str]] | None,
               pinned: Mapping[str, Any]) -> list[Rail]:
    """Each rail with the GPU nearest it: pinned in ``qualify.rails`` (a GPU index, or
    ``host`` for host memory), else the nearest in
    ``topo`` (ties to the GPU with fewest rails so far, then the lowest index), else none."""
    taken: dict[int, int] = {}
    rails = []
    for hca, port in ports:
        pin = pinned.get(hca)
        if isinstance(pin, int) and not isinstance(pin, bool):
            rails.append(Rail(hca, port, pin, "qualify.rails"))
            continue
        if pin == "host":
            rails.append(Rail(hca, port, None, "qualify.rails pins it to host memory"))
            continue
        classes = (topo or {}).get(hca)
        if not classes:
            why = "nvidia-smi topo -m did not list it" if topo else "the topology is unknown"
            rails.append(Rail(hca, port, None, why))
            continue
        near = [(NEAR.index(c), taken.get(g, 0), g) for g, c in classes.items() if c in NEAR]
        if not near:
            rails.append(Rail(hca, port, None, "no GPU nearer than SYS"))
            continue
        rank, _, gpu = min(near)
        taken[gpu] = taken.get(gpu, 0) + 1
        rails.append(Rail(hca, port, gpu, f"{NEAR[rank]} to GPU{gpu} (nvidia-smi topo -m)"))
    return rails


def perftest_has_cuda(help_text: str) -> bool:
    """Whether ``ib_write_bw --help`` lists ``--use_cuda``: a build without CUDA (Debian's
    perftest 4.5) does not, and refuses the option (perftest_parameters.c, ``#ifdef
    HAVE_CUDA`` around it)."""
    return "--use_cuda" in help_text


def compare_problem(path: str) -> str | None:
    """Why gpu_burn would misread ``path`` as an option, or None."""
    trap = next((t for t in _GPU_BURN_TRAPS if t in path), None)
    if trap is not None:
        return (f"its compare file's path {path} holds {trap!r}, which gpu_burn reads as an "
                f"option wherever it appears (gpu_burn-drv.cpp:826-856): move it or set "
                f"qualify.tools.gpu_burn_compare")
    if not os.path.isabs(path):
        return f"its compare file {path} is not an absolute path"
    return None


def _text(result: CommandResult) -> str | None:
    return result.stdout if result.returncode == 0 else None


def _why(result: CommandResult) -> str:
    return (result.error or result.stderr.strip()[-200:] or f"exit {result.returncode}")


def compare_file(node: str, runner: ToolRunner, tools: Mapping[str, Any], timeout: float
                 ) -> tuple[str | None, str | None]:
    """(gpu_burn's compare.fatbin, why there is none): ``qualify.tools.gpu_burn_compare``,
    else beside the binary (an absolute ``qualify.tools.gpu_burn``, or the one on the
    node's PATH with its links followed: the build writes compare.fatbin beside gpu_burn)."""
    given = tools.get("gpu_burn_compare")
    if given:
        return str(given), None
    program = str(tools.get("gpu_burn") or "gpu_burn")
    if not os.path.isabs(program):
        found = runner(node, ["which", program], {}, timeout)
        if found.returncode != 0 or not found.stdout.strip():
            return None, f"which {program}: {_why(found)}"
        program = found.stdout.strip().splitlines()[0]
    real = runner(node, ["readlink", "-f", program], {}, timeout)
    if real.returncode != 0 or not real.stdout.strip():
        return None, f"readlink -f {program}: {_why(real)}"
    return os.path.join(os.path.dirname(real.stdout.strip()), "compare.fatbin"), None


def take(node: str, runner: ToolRunner, settings: Mapping[str, Any], tests: frozenset[str],
         timeout: float) -> Inventory:
    """The node's inventory for ``tests`` (test ids): only what they need is asked."""
    tools = settings.get("tools") or {}
    inv = Inventory()
    smi = runner(node, ["nvidia-smi", "--query-gpu=index,pci.bus_id", "--format=csv,noheader"],
                 {}, timeout)
    if (text := _text(smi)) is not None:
        inv.gpus = parse_gpus(text)
    else:
        inv.problems.append(f"nvidia-smi: {_why(smi)}")
    ibstat = runner(node, [str(tools.get("ibstat") or "ibstat")], {}, timeout)
    ports = parse_ibstat(ibstat.stdout) if ibstat.returncode == 0 else []
    if ibstat.returncode != 0:
        inv.problems.append(f"ibstat: {_why(ibstat)}")
    elif not ports and "Link layer: Ethernet" in ibstat.stdout:
        inv.notes.append("RoCE ports only: not tested (perftest would need each port's RoCE "
                         "v2 GID index, -x)")
    if ports:
        topo = runner(node, ["nvidia-smi", "topo", "-m"], {}, timeout)
        matrix = parse_topo(topo.stdout) if topo.returncode == 0 else None
        if matrix is None:
            inv.notes.append(f"nvidia-smi topo -m: {_why(topo)}: rails use host memory")
        pinned = settings.get("rails") or {}
        ports, left_out = compute_ports(ports, matrix, pinned)
        inv.notes += left_out
        inv.rails = pair_rails(ports, matrix, pinned)
        for rail in inv.rails:
            if rail.gpu is None:
                inv.notes.append(f"{rail.hca}/{rail.port}: {rail.why}: host memory")
    if inv.rails and tests & {"nic", "rails"}:
        perftest = str(tools.get("ib_write_bw") or "ib_write_bw")
        helped = runner(node, [perftest, "--help"], {}, timeout)
        # perftest's --help exits 1 (HELP_EXIT -> FAILURE, write_bw.c): read what it printed
        inv.perftest_cuda = perftest_has_cuda(helped.stdout + helped.stderr) \
            if helped.error is None and helped.returncode != 127 else None
        if inv.perftest_cuda is False:
            inv.notes.append(f"{perftest} was built without CUDA (no --use_cuda in its "
                             "--help): the RDMA tests use host memory")
    if "gpu_compute" in tests and inv.gpus:
        inv.gpu_burn_compare, why = compare_file(node, runner, tools, timeout)
        if why is not None:
            inv.problems.append(f"gpu_burn's compare.fatbin: {why}")
    return inv
