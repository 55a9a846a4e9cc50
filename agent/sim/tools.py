"""Stand-ins for the active-test tools on simulated nodes: each prints exactly what the real
tool prints (nccl-tests v2.19 table, perftest's banner and result block, nvbandwidth's
matrices, gpu-burn's progress and verdict, ``dcgmi diag -j`` of DCGM 4, ``ibstat``,
``nvidia-smi --query-gpu``), with
figures from ``sim/bandwidth.py``. A node with ``tools_hang`` runs a real process tree that
never answers, so the caller's deadline and session kill are exercised for real.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..read.sources import CommandResult, run_command
from . import bandwidth as bw
from .node import build
from .spec import load_spec
from .state.hardware import SimGpu, SimNode
from .state.ib import LANE_GBPS

# A parent that starts a child and both sleep: what a hung MPI launcher looks like.
_HANG = ("import os, subprocess, sys, time\n"
         "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)'])\n"
         "with open(sys.argv[1], 'a') as f: f.write(f'{os.getpid()} {child.pid}\\n')\n"
         "time.sleep(3600)\n")
_RULE = "-" * 87
IMEX_CHANNELS = "/dev/nvidia-caps-imex-channels"


class _Exit(Exception):
    """A stand-in ending with a non-zero status and what it printed on stderr."""

    def __init__(self, code: int, stderr: str) -> None:
        super().__init__(stderr)
        self.code, self.stderr = code, stderr
_VALUE_FLAGS = ("-d", "-i", "-s", "-n", "-p", "-x", "-D")


def _opt(argv: list[str], flag: str, default: str) -> str:
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return default


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1:].upper() in units else int(text)


class SimTools:
    """The qualify tool runner for a simulated cluster: ``(node, argv, env, timeout)``."""

    def __init__(self, nodes: Mapping[str, SimNode], seed: int = 0,
                 installed: frozenset[str] | None = None) -> None:
        self.nodes = dict(nodes)
        self.seed = seed
        self.installed = installed  # None: every tool stood in for
        self.calls: Counter[tuple[str, str]] = Counter()
        self.hung_pids: list[int] = []
        # Simulated duration of each call (the test time a real tool would take), by
        # (node or comma-joined nodes, command line): bench/qualify_schedule.py adds them up.
        self.test_seconds: dict[tuple[str, str], float] = {}
        self._tools: dict[str, Callable[[SimNode, list[str], Mapping[str, str], int], str]] = {
            "all_reduce_perf": self._all_reduce, "nvbandwidth": self._nvbandwidth,
            "ib_write_bw": self._ib_write_bw, "gpu_burn": self._gpu_burn,
            "nvidia-smi": self._nvidia_smi, "ibstat": self._ibstat, "dcgmi": self._dcgmi,
            "ls": self._ls}

    def __call__(self, node: str, argv: list[str], env: Mapping[str, str],
                 timeout_s: float) -> CommandResult:
        program = argv[0].rsplit("/", 1)[-1]
        sim = self.nodes.get(node)
        if sim is None:
            return CommandResult(argv, None, error=f"{node}: no such simulated node")
        tool = self._tools.get(program)
        if tool is None or (self.installed is not None and program not in self.installed):
            return CommandResult(argv, None, error=f"{program}: not found")
        if sim.tools_hang and program not in ("nvidia-smi", "ibstat"):
            with tempfile.TemporaryDirectory() as where:
                pids = Path(where) / "pids"
                result = run_command([sys.executable, "-c", _HANG, str(pids)], timeout_s)
                if pids.exists():
                    self.hung_pids.extend(int(p) for p in pids.read_text().split())
            return CommandResult(argv, result.returncode, result.stdout, result.stderr,
                                 result.error)
        key = (node, " ".join(argv) + repr(sorted(env.items())))
        self.calls[key] += 1
        try:
            text = tool(sim, argv, env, self.calls[key])
            self.test_seconds[(node, " ".join(argv))] = test_seconds(text)
            return CommandResult(argv, 0, text)
        except _Exit as exc:
            return CommandResult(argv, exc.code, "", exc.stderr)

    def group(self, nodes: Sequence[str], argv: list[str], env: Mapping[str, str],
              timeout_s: float) -> CommandResult:
        """One command over several nodes (an MPI job of one rank per node): only
        ``all_reduce_perf`` spans nodes; rank 0 prints the table, as nccl-tests does."""
        program = argv[0].rsplit("/", 1)[-1]
        sims = [self.nodes.get(n) for n in nodes]
        if any(s is None for s in sims):
            return CommandResult(argv, None, error=f"{nodes}: no such simulated node")
        group = [s for s in sims if s is not None]
        if program != "all_reduce_perf" or (
                self.installed is not None and program not in self.installed):
            return CommandResult(argv, None, error=f"{program}: not found")
        hung = next((s for s in group if s.tools_hang), None)
        if hung is not None:
            return self(hung.name, argv, env, timeout_s)
        key = (",".join(nodes), " ".join(argv) + repr(sorted(env.items())))
        self.calls[key] += 1
        result = all_reduce_group(group, argv, env, self.seed, self.calls[key])
        self.test_seconds[(",".join(nodes), " ".join(argv))] = test_seconds(result.stdout)
        return result

    def _noise(self, node: SimNode, attempt: int, *where: object) -> float:
        return bw.noise(self.seed, node.name, attempt, *where)

    def _nvidia_smi(self, node: SimNode, argv: list[str], env: Mapping[str, str],
                    attempt: int) -> str:
        return "".join(f"{g.index}, {g.bdf.upper().replace('0000:', '00000000:', 1)}\n"
                       for g in node.gpus)

    def _ls(self, node: SimNode, argv: list[str], env: Mapping[str, str],
            attempt: int) -> str:
        """``ls`` of the IMEX channel directory (the only path qualify lists)."""
        if argv[-1].rstrip("/") == IMEX_CHANNELS and bw.imex_channel(node):
            return "channel0\n"
        raise _Exit(2, f"ls: cannot access '{argv[-1]}': No such file or directory\n")

    def _ibstat(self, node: SimNode, argv: list[str], env: Mapping[str, str],
                attempt: int) -> str:
        out = []
        for hca in node.hcas:
            guid = "0x" + hca.node_guid.replace(":", "")
            out += [f"CA '{hca.name}'", f"\tCA type: {hca.hca_type}",
                    f"\tNumber of ports: {len(hca.ports)}",
                    f"\tFirmware version: {hca.fw_ver}", "\tHardware version: 0",
                    f"\tNode GUID: {guid}", f"\tSystem image GUID: {guid}"]
            for port in hca.ports:
                out += [f"\tPort {port.port}:", f"\t\tState: {port.state.capitalize()}",
                        f"\t\tPhysical state: {port.phys_state}",
                        f"\t\tRate: {port.width * LANE_GBPS[port.speed]:g}",
                        f"\t\tBase lid: {port.lid}", "\t\tLMC: 0", f"\t\tSM lid: {port.sm_lid}",
                        "\t\tCapability mask: 0xa651e848", f"\t\tPort GUID: {guid}",
                        f"\t\tLink layer: {port.link_layer}"]
        return "\n".join(out) + "\n"

    def _all_reduce(self, node: SimNode, argv: list[str], env: Mapping[str, str],
                    attempt: int) -> str:
        ranks = int(_opt(argv, "-g", str(len(node.gpus))))
        through_nics = env.get("NCCL_P2P_DISABLE") == "1" and env.get("NCCL_SHM_DISABLE") == "1"
        algo = env.get("NCCL_ALGO", "default")
        peak = bw.allreduce_busbw(node, algo, through_nics) * self._noise(
            node, attempt, "allreduce", algo, through_nics)
        info = []
        if env.get("NCCL_DEBUG", "").upper() == "INFO":
            network = "Socket" if through_nics and node.socket_fallback else "IB"
            info.append(f"{node.name}:4000:4000 [0] NCCL INFO Using network {network}")
        return _table(argv, [(node, node.gpus[:ranks])], info,
                      lambda size: peak * size / (size + (32 << 20)))  # latency-bound below

    def _nvbandwidth(self, node: SimNode, argv: list[str], env: Mapping[str, str],
                     attempt: int) -> str:
        names = [a for a in argv[1:] if not a.startswith("-")]
        gpus = [g.index for g in node.gpus]
        lines = ["nvbandwidth Version: v0.8", "Built from Git version: v0.8", "",
                 f"CUDA Runtime Version: {node.cuda_version}",
                 f"CUDA Driver Version: {node.cuda_version}",
                 f"Driver Version: {node.driver_version}", "", node.name]
        for gpu in node.gpus:
            lines.append(f"Device {gpu.index}: {gpu.name} ({gpu.bdf[:-2].upper()})")
        lines.append("")
        cases: dict[str, tuple[str, Callable[[int, int], float | None], bool]] = {
            "host_to_device_memcpy_ce": ("memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
                                         lambda r, c: bw.host_link(node, c), True),
            "device_to_host_memcpy_ce": ("memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)",
                                         lambda r, c: bw.host_link(node, c), True),
            "device_to_device_memcpy_read_ce": (
                "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)",
                lambda r, c: None if r == c else bw.p2p(node, r, c), False),
            "device_local_copy": ("memcpy local GPU(column) bandwidth (GB/s)",
                                  lambda r, c: bw.hbm(node, c), True),
        }
        for name in names:
            if name not in cases:
                lines += [f"ERROR: Testcase {name} not found!", ""]
                continue
            description, value, one_row = cases[name]
            lines += [f"Running {name}.", description,
                      "   " + "".join(f"{c:>10}" for c in gpus)]
            total = 0.0
            for row in [0] if one_row else gpus:
                cells = []
                for column in gpus:
                    figure = value(row, column)
                    if figure is None:
                        cells.append(f"{'N/A':>10}")
                        continue
                    figure *= self._noise(node, attempt, name, row, column)
                    total += figure
                    cells.append(f"{figure:10.2f}")
                lines.append(f"{row:>2} " + "".join(cells))
            lines += ["", f"SUM {name} {total:.2f}", ""]
        lines += ["NOTE: The reported results may not reflect the full capabilities of the "
                  "platform.", "Performance can vary with software drivers, hardware clocks, "
                  "and system topology.", ""]
        return "\n".join(lines)

    def _ib_write_bw(self, node: SimNode, argv: list[str], env: Mapping[str, str],
                     attempt: int) -> str:
        device = _opt(argv, "-d", "mlx5_0")
        size = _size(_opt(argv, "-s", "65536"))
        iters = int(_opt(argv, "-n", "5000"))
        client = not argv[-1].startswith("-") and argv[-2] not in _VALUE_FLAGS
        hca = next((h for h in node.hcas if h.name == device), None)
        if hca is None:
            return f"IB device {device} not found\n Unable to find the Infiniband/RoCE device\n"
        remote = self.nodes.get(argv[-1]) if client and argv[-1] != "localhost" else None
        if client and argv[-1] != "localhost" and remote is None:
            raise _Exit(1, f" Couldn't connect to {argv[-1]}:{_opt(argv, '-p', '18515')}\n"
                           "Unable to init the socket connection\n")
        if remote is not None:  # rail i of this node to rail i of the server's node
            gbps = min(bw.cross_rail_gbps(node, device), bw.cross_rail_gbps(remote, device))
        else:
            gbps = bw.nic_gbps(node, device)
        gbps *= self._noise(node, attempt, "nic", device, *([remote.name] if remote else []))
        port = hca.ports[0]
        lines = []
        if any(a.startswith("--use_cuda") for a in argv):
            gpu = _opt(argv, "--use_cuda", "0")
            lines += ["Perftest doesn't supports CUDA tests with inline messages: inline size "
                      "set to 0", "initializing CUDA", f"Picking device No. {gpu}",
                      f"[pid = 4242, dev = {gpu}] device name = [{node.gpus[0].name}]",
                      "creating CUDA Ctx", "making it the current CUDA Ctx",
                      f"cuMemAlloc() of a {2 * size} bytes GPU buffer"]
        if not client:
            lines += ["", "************************************",
                      "* Waiting for client to connect... *",
                      "************************************"]
        gbits = "--report_gbits" in argv
        unit = "Gb/sec" if gbits else "MiB/sec"
        value = gbps if gbits else gbps * 1e9 / 8 / 1048576
        lines += [_RULE, "                    RDMA_Write BW Test",
                  f" Dual-port       : OFF\t\tDevice         : {device}",
                  " Number of qps   : 1\t\tTransport type : IB",
                  " Connection type : RC\t\tUsing SRQ      : OFF",
                  " PCIe relax order: ON", " ibv_wr* API     : ON", " TX depth        : 128",
                  " CQ Moderation   : 100", " Mtu             : 4096[B]",
                  f" Link type       : {'IB' if port.link_layer == 'InfiniBand' else 'Ethernet'}",
                  " Max inline data : 0[B]", " rdma_cm QPs\t : OFF",
                  " Data ex. method : Ethernet", _RULE,
                  f" local address: LID {port.lid:#06x} QPN 0x0032 PSN 0x5f2841 RKey 0x002440 "
                  "VAddr 0x007f2e5f64b000",
                  f" remote address: LID {port.lid:#06x} QPN 0x003a PSN 0xc0fd7e RKey 0x002442 "
                  "VAddr 0x007f443b2f8000", _RULE,
                  f" #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   "
                  "MsgRate[Mpps]",
                  f" {size:<7}    {iters:<10}       {value * 1.001:<7.2f}            "
                  f"{value:<7.2f}\t\t     {gbps * 1e9 / 8 / size / 1e6:<7.6f}", _RULE, ""]
        return "\n".join(lines)

    def _dcgmi(self, node: SimNode, argv: list[str], env: Mapping[str, str],
               attempt: int) -> str:
        """``dcgmi diag -r <level|names> -j`` as DCGM 4 prints it: software, pcie (with its
        bandwidth info lines) and, at level 3+ or ``-r diagnostic``, the FP64 GEMM test
        with the Gflop/s it reached."""
        level = _opt(argv, "-r", "1")
        tests: list[dict[str, object]] = [{"name": "software", "results": [
            {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"}],
            "test_summary": {"status": "Pass"}}]

        def per_gpu(name: str, info: Callable[[int], list[str]]) -> dict[str, object]:
            return {"name": name, "results": [
                {"entity_group": "GPU", "entity_group_id": 1, "entity_id": g.index,
                 "info": info(g.index), "status": "Pass"} for g in node.gpus],
                "test_summary": {"status": "Pass"}}

        if level not in ("1", "diagnostic"):
            tests.append(per_gpu("pcie", lambda i: [
                f"GPU {i} GPU to Host bandwidth:\t\t{bw.host_link(node, i) * 0.9:.2f} GB/s",
                f"GPU {i} Host to GPU bandwidth:\t\t{bw.host_link(node, i) * 0.9:.2f} GB/s"]))
        if level in ("3", "4", "diagnostic"):
            tests.append(per_gpu("diagnostic", lambda i: [
                "Running with precisions: FP64 1, FP32 1, FP16 1",
                f"GPU {i} calculated at approximately "
                f"{bw.gpu_gflops(node, i) * self._noise(node, attempt, 'dcgm', i):.2f} "
                "gigaflops during this test"]))
        document = {"DCGM Diagnostic": {"test_categories": [
            {"category": "Hardware", "tests": tests}]},
            "entity_groups": [{"entity_group": "GPU", "entity_group_id": 1, "entities": [
                {"entity_id": g.index, "serial_num": g.serial,
                 "device_id": f"{node.layout.gpu_device_id:04x}"} for g in node.gpus]}],
            "metadata": {"version": "4.2.3", "Driver Version Detected": node.driver_version}}
        return json.dumps(document, indent=8) + "\n"

    def _gpu_burn(self, node: SimNode, argv: list[str], env: Mapping[str, str],
                  attempt: int) -> str:
        seconds = next((a for a in reversed(argv[1:]) if a.isdigit()), "10")
        lines = [f"Burning for {seconds} seconds."]
        for gpu in node.gpus:
            lines.append(f"GPU {gpu.index}: {gpu.name} (UUID: {gpu.uuid})")
        figures = [bw.gpu_gflops(node, g.index) * self._noise(node, attempt, "burn", g.index)
                   for g in node.gpus]
        progress = " - ".join(f"{int(f * float(seconds) / 40):d} ({f:.0f} Gflop/s)"
                              for f in figures)
        errors = " - ".join("0" for _ in figures)
        temps = " - ".join("61 C" for _ in figures)
        lines.append(f"100.0%  proc'd: {progress}   errors: {errors}   temps: {temps} ")
        lines.append("Killing processes with SIGTERM (soft kill)")
        for gpu in node.gpus:
            lines += [f"Freed memory for dev {gpu.index}", "Uninitted cublas"]
        lines += ["done", "", f"Tested {len(node.gpus)} GPUs:"]
        lines += [f"\tGPU {g.index}: OK" for g in node.gpus]
        return "\n".join(lines) + "\n"



def test_seconds(text: str) -> float:
    """How long the printed run took: nccl-tests rows (time in µs, in-place and
    out-of-place, warm-up and timed iterations), perftest rows (bytes x iterations at the
    average rate), else nothing measurable (0)."""
    total = 0.0
    iters = 25.0
    for line in text.splitlines():
        fields = line.split()
        if line.startswith("# nThread") and "iters:" in fields:
            iters = float(fields[fields.index("iters:") + 1]) + 5.0
        elif len(fields) == 13 and fields[0].isdigit() and fields[4] == "-1":
            total += (float(fields[5]) + float(fields[9])) * 1e-6 * iters
        elif len(fields) == 5 and fields[0].isdigit() and fields[1].isdigit() and \
                "Gb/sec" in text:
            total += int(fields[0]) * int(fields[1]) * 8 / (float(fields[3]) * 1e9 or 1.0)
    return total


def _table(argv: list[str], ranks: list[tuple[SimNode, list[SimGpu]]], info: list[str],
           busbw_at: Callable[[int], float]) -> str:
    """nccl-tests' all_reduce_perf output: the banner, one device line per rank, the
    NCCL lines, one row per size from ``-b`` to ``-e`` and the summary."""
    low, high = _size(_opt(argv, "-b", "8")), _size(_opt(argv, "-e", "128M"))
    count = sum(len(gpus) for _, gpus in ranks)
    lines = ["# nccl-tests version 2.17.6 nccl-headers=22304 nccl-library=22304",
             "# Collective test starting: all_reduce_perf",
             f"# nThread 1 nGpus {len(ranks[0][1])} minBytes {low} maxBytes {high} step: "
             "2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0", "#",
             "# Using devices"]
    rank = 0
    for node, gpus in ranks:
        for gpu in gpus:
            lines.append(f"#  Rank {rank:2d} Group  0 Pid  {4000 + gpu.index:5d} on "
                         f"{node.name} device {gpu.index:2d} [{gpu.bdf[:-2]}] {gpu.name}")
            rank += 1
    lines += info
    lines += ["#", "#                                                              "
              "out-of-place                       in-place",
              "#       size         count      type   redop    root     time   algbw   "
              "busbw #wrong     time   algbw   busbw #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  "
              "(GB/s)            (us)  (GB/s)  (GB/s)"]
    factor = 2 * (count - 1) / count if count > 1 else 1.0
    total, rows, size = 0.0, 0, max(low, 4)
    while size <= high:
        busbw = busbw_at(size)
        algbw = busbw / factor
        micros = size / (algbw * 1e3) if algbw else 0.0
        lines.append(f"{size:>12} {size // 4:>13}     float     sum      -1 {micros:8.1f} "
                     f"{algbw:7.2f} {busbw:7.2f}      0 {micros:8.1f} {algbw:7.2f} "
                     f"{busbw:7.2f}      0")
        total, rows, size = total + 2 * busbw, rows + 2, size * 2
    lines += ["# Out of bounds values : 0 OK",
              f"# Avg bus bandwidth    : {total / max(rows, 1):.4f} ", "#",
              "# Collective test concluded: all_reduce_perf", "#", ""]
    return "\n".join(lines)


def all_reduce_group(group: list[SimNode], argv: list[str], env: Mapping[str, str],
                     seed: int, attempt: int) -> CommandResult:
    """all_reduce_perf as one MPI job over ``group`` (one rank per node, ``-g`` GPUs each):
    over the NICs (sim/bandwidth.py group_bandwidth), or, with ``NCCL_MNNVL_ENABLE=1`` on
    NVL72 trays, over multi-node NVLink — which needs every tray's IMEX channel (without
    one, CUDA's fabric memory calls fail with a permission error and so does NCCL)."""
    algo = env.get("NCCL_ALGO", "default")
    host = group[0].name
    where = ",".join(n.name for n in group)
    info = []
    mnnvl = env.get("NCCL_MNNVL_ENABLE") == "1" and all(n.profile.nvl72 for n in group)
    if mnnvl:
        lost = next((n for n in group if not bw.imex_channel(n)), None)
        if lost is not None:
            text = (f"{lost.name}:4000:4000 [0] NCCL WARN Cuda failure 'operation not "
                    "permitted' (cuMemExportToShareableHandle, no IMEX channel)\n"
                    f"{lost.name}: Test NCCL failure common.cu:1279 'unhandled cuda error "
                    "(run with NCCL_DEBUG=INFO for details) / '\n"
                    f" .. {lost.name} pid 4000: Test failure common.cu:1154\n")
            return CommandResult(argv, 1, text)
        peak = bw.mnnvl_busbw(group) * bw.noise(seed, where, attempt, "mnnvl")
        info.append(f"{host}:4000:4000 [0] NCCL INFO MNNVL enabled over {len(group)} trays")
        return CommandResult(argv, 0, _table(argv, [(n, n.gpus) for n in group], info,
                                             lambda size: peak * size / (size + (32 << 20))))
    band = bw.group_bandwidth(group, algo) * bw.noise(seed, where, attempt, "group", algo)
    if env.get("NCCL_DEBUG", "").upper() == "INFO":
        network = "Socket" if any(n.socket_fallback for n in group) else "IB"
        info.append(f"{host}:4000:4000 [0] NCCL INFO Using network {network}")
    return CommandResult(argv, 0, _table(argv, [(n, n.gpus) for n in group], info,
                                         lambda size: bw.group_busbw(group, algo, size, band)))


def simulated_cluster(arg: str, seed: int = 0) -> tuple[dict[str, SimNode], SimTools]:
    """The nodes of a simulation spec (a profile name or a spec file) and their tools."""
    nodes = {name: build(spec) for name, spec in load_spec(arg).nodes.items()}
    return nodes, SimTools(nodes, seed)
