"""Stand-ins for the active-test tools on simulated nodes, each printing what the real tool
prints for the node's state: nccl-tests (nccl_tests.py), nvbandwidth (nvbandwidth.py),
gpu-burn (gpu_burn.py), perftest's ib_write_bw (perftest.py), ``dcgmi diag -j``
(dcgmi.py), ``ibstat``, ``nvidia-smi``, ``which``, ``readlink`` and ``ls``
(host_tools.py), with figures from sim/bandwidth.py. Each module cites the source lines
and the real captures it follows; tests/unit/test_sim_tools_real.py holds them to those
captures line by line.

An argument a stand-in does not simulate is refused as the simulator's limit (an error
that says so), never answered with output the real tool would not print. A node with
``tools_hang`` runs a real process tree that never answers, so the caller's deadline and
session kill are exercised for real.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import uuid
import weakref
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..read.sources import CommandResult, run_command
from . import bandwidth as bw
from . import dcgmi, gpu_burn, host_tools, mndiag, nccl_tests, nvbandwidth, perftest
from .node import build
from .spec import load_spec
from .state.hardware import SimNode
from .state.ib import SimHca
from .toolkit import INSTALLED, NotModelled, Printed

# A parent that starts a child and both sleep: what a hung MPI launcher looks like.
_HANG = ("import os, subprocess, sys, time\n"
         "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)'])\n"
         "with open(sys.argv[1], 'a') as f: f.write(f'{os.getpid()} {child.pid}\\n')\n"
         "time.sleep(3600)\n")
IMEX_CHANNELS = "/dev/nvidia-caps-imex-channels"
# The shell's utilities, on every node whatever tools are installed.
UTILITIES = ("which", "readlink", "ls")
Tool = Callable[[SimNode, list[str], Mapping[str, str], int, float], Printed]


def rendezvous_folder(spec: str) -> Path:
    """Where the ib_write_bw servers and clients of one simulated cluster meet when each
    runs as its own process (tool_main.py under a real launcher)."""
    digest = hashlib.sha256(os.path.abspath(spec).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"clusterdiag-sim-perftest-{os.getuid()}-{digest}"


class SimTools:
    """The qualify tool runner for a simulated cluster: ``(node, argv, env, timeout)``."""

    def __init__(self, nodes: Mapping[str, SimNode], seed: int = 0,
                 installed: frozenset[str] | None = None,
                 rendezvous: Path | None = None) -> None:
        self.nodes = dict(nodes)
        self.seed = seed
        self.installed = installed  # None: every tool stood in for
        self.calls: Counter[tuple[str, str]] = Counter()
        self.hung_pids: list[int] = []
        # Simulated duration of each call (the test time a real tool would take), by
        # (node or comma-joined nodes, command line): bench/qualify_schedule.py adds them up.
        self.test_seconds: dict[tuple[str, str], float] = {}
        if rendezvous is None:  # made by the first server, removed with the runner
            rendezvous = Path(tempfile.gettempdir()) / (
                f"clusterdiag-sim-perftest-{os.getpid()}-{id(self):x}-{uuid.uuid4().hex[:8]}")
            weakref.finalize(self, shutil.rmtree, rendezvous, True)
        self.meet = perftest.Rendezvous(rendezvous)
        self._tools: dict[str, Tool] = {
            "all_reduce_perf": self._all_reduce, "nvbandwidth": self._nvbandwidth,
            "ib_write_bw": self._ib_write_bw, "gpu_burn": self._gpu_burn,
            "nvidia-smi": self._nvidia_smi, "ibstat": self._ibstat, "dcgmi": self._dcgmi,
            "which": self._which, "readlink": self._readlink, "ls": self._ls,
            "ssh": self._ssh, "bash": self._bash}

    def has(self, program: str) -> bool:
        return program in UTILITIES or self.installed is None or program in self.installed

    def __call__(self, node: str, argv: list[str], env: Mapping[str, str],
                 timeout_s: float) -> CommandResult:
        program = argv[0].rsplit("/", 1)[-1]
        sim = self.nodes.get(node)
        if sim is None:
            return CommandResult(argv, None, error=f"{node}: no such simulated node")
        tool = self._tools.get(program)
        if tool is None or not self.has(program) or (
                "/" in argv[0] and program in INSTALLED and argv[0] not in INSTALLED[program]):
            return CommandResult(argv, None, error=f"{argv[0]}: not found")
        if sim.tools_hang and program not in ("nvidia-smi", "ibstat", *UTILITIES):
            return self._hang(argv, timeout_s)
        key = (node, " ".join(argv) + repr(sorted(env.items())))
        self.calls[key] += 1
        try:
            printed = tool(sim, argv, env, self.calls[key], timeout_s)
        except (NotModelled, perftest.ServerTimeout) as exc:
            return CommandResult(argv, None, error=str(exc))
        if program == "ib_write_bw" and "Couldn't connect to" in printed.stderr:
            # A client refused before its server listened measured nothing: its retry draws
            # the noise this attempt would have, however many retries the timing took.
            self.calls[key] -= 1
        self.test_seconds[(node, " ".join(argv))] = (
            printed.seconds if printed.seconds is not None else test_seconds(printed.stdout))
        return CommandResult(argv, printed.code, printed.stdout, printed.stderr)

    def _hang(self, argv: list[str], timeout_s: float) -> CommandResult:
        with tempfile.TemporaryDirectory() as where:
            pids = Path(where) / "pids"
            result = run_command([sys.executable, "-c", _HANG, str(pids)], timeout_s)
            if pids.exists():
                self.hung_pids.extend(int(p) for p in pids.read_text().split())
        return CommandResult(argv, result.returncode, result.stdout, result.stderr,
                             result.error)

    def group(self, nodes: Sequence[str], argv: list[str], env: Mapping[str, str],
              timeout_s: float, per_node: int = 1) -> CommandResult:
        """One command over several nodes, ``per_node`` tasks on each (``all_reduce_perf``,
        one task per node: an MPI build's rank 0 prints one table over every rank; without
        MPI each task is a job of its own and prints its own node's output, nccl_tests.py;
        ``nvbandwidth``'s multinode testcase, one task per GPU: rank 0's matrix)."""
        program = argv[0].rsplit("/", 1)[-1]
        sims = [self.nodes.get(n) for n in nodes]
        if any(s is None for s in sims):
            return CommandResult(argv, None, error=f"{nodes}: no such simulated node")
        group = [s for s in sims if s is not None]
        if program not in ("all_reduce_perf", "nvbandwidth") or not self.has(program):
            return CommandResult(argv, None, error=f"{argv[0]}: not found")
        if (program == "nvbandwidth") != (per_node > 1):
            return CommandResult(argv, None, error=f"{program} with {per_node} task(s) per "
                                                   "node is not simulated")
        hung = next((s for s in group if s.tools_hang), None)
        if hung is not None:
            return self(hung.name, argv, env, timeout_s)
        key = (",".join(nodes), " ".join(argv) + repr(sorted(env.items())))
        self.calls[key] += 1
        try:
            printed = nvbandwidth.multinode(
                group, per_node, argv, lambda *where: bw.noise(self.seed, self.calls[key],
                                                                *where)) \
                if program == "nvbandwidth" else \
                self.group_printed(group, argv, env, self.calls[key])
        except NotModelled as exc:
            return CommandResult(argv, None, error=str(exc))
        self.test_seconds[(",".join(nodes), " ".join(argv))] = (
            printed.seconds if printed.seconds is not None else test_seconds(printed.stdout))
        return CommandResult(argv, printed.code, printed.stdout, printed.stderr)

    def group_printed(self, group: list[SimNode], argv: list[str], env: Mapping[str, str],
                      attempt: int) -> Printed:
        if all(n.nccl_tests_mpi for n in group):
            return all_reduce_group(group, argv, env, self.seed, attempt)
        # Not an MPI build: every task runs alone (common.cu:1480), its stdout written at
        # its exit in one piece (a pipe's full buffer), the step's status the worst.
        runs = [self._all_reduce(n, argv, env, attempt, 0.0) for n in group]
        return Printed("".join(r.stdout for r in runs), "".join(r.stderr for r in runs),
                       max(r.code for r in runs),
                       max((r.seconds or 0.0 for r in runs), default=0.0))

    def _noise(self, node: SimNode, attempt: int, *where: object) -> float:
        return bw.noise(self.seed, node.name, attempt, *where)

    def _nvidia_smi(self, node: SimNode, argv: list[str], env: Mapping[str, str],
                    attempt: int, timeout_s: float) -> Printed:
        if argv[1:] == mndiag.COMPUTE_APPS:  # no job runs on a simulated GPU
            return Printed("")
        return host_tools.nvidia_smi(node, argv)

    def _ssh(self, node: SimNode, argv: list[str], env: Mapping[str, str],
             attempt: int, timeout_s: float) -> Printed:
        """The prerequisite probe only: ``true`` on another tray, which prints nothing."""
        if argv[1:-2] != mndiag.SSH_OPTIONS or argv[-1] != "true" or argv[-2] not in self.nodes:
            raise NotModelled(f"ssh {' '.join(argv[1:])} is not simulated")
        return Printed("")

    def _bash(self, node: SimNode, argv: list[str], env: Mapping[str, str],
              attempt: int, timeout_s: float) -> Printed:
        """The host engine's port opened with bash's /dev/tcp: nothing printed on success."""
        target = next((n for n in self.nodes if argv[1:] == mndiag.port_probe(n)), None)
        if target is None:
            raise NotModelled(f"bash {' '.join(argv[1:])} is not simulated")
        return Printed("")

    def _ibstat(self, node: SimNode, argv: list[str], env: Mapping[str, str],
                attempt: int, timeout_s: float) -> Printed:
        return host_tools.ibstat(node, argv, nccl_tests.pid_of(node, "ibstat"))

    def _which(self, node: SimNode, argv: list[str], env: Mapping[str, str],
               attempt: int, timeout_s: float) -> Printed:
        return host_tools.which(argv, self._installed())

    def _readlink(self, node: SimNode, argv: list[str], env: Mapping[str, str],
                  attempt: int, timeout_s: float) -> Printed:
        return host_tools.readlink(argv, self._installed())

    def _installed(self) -> frozenset[str]:
        return frozenset(INSTALLED) if self.installed is None else self.installed

    def _ls(self, node: SimNode, argv: list[str], env: Mapping[str, str],
            attempt: int, timeout_s: float) -> Printed:
        return host_tools.imex_ls(node, argv[-1], IMEX_CHANNELS)

    def _all_reduce(self, node: SimNode, argv: list[str], env: Mapping[str, str],
                    attempt: int, timeout_s: float) -> Printed:
        through_nics = env.get("NCCL_P2P_DISABLE") == "1" and env.get("NCCL_SHM_DISABLE") == "1"
        algo = env.get("NCCL_ALGO", "default")
        peak = bw.allreduce_busbw(node, algo, through_nics) * self._noise(
            node, attempt, "allreduce", algo, through_nics)
        network = "Socket" if through_nics and node.socket_fallback else "IB"
        return nccl_tests.single(node, argv, env,
                                 lambda size, half: peak * size / (size + (32 << 20)),
                                 network)  # latency-bound below

    def _nvbandwidth(self, node: SimNode, argv: list[str], env: Mapping[str, str],
                     attempt: int, timeout_s: float) -> Printed:
        return nvbandwidth.run(node, argv, lambda *where: self._noise(node, attempt, *where))

    def _ib_write_bw(self, node: SimNode, argv: list[str], env: Mapping[str, str],
                     attempt: int, timeout_s: float) -> Printed:
        parsed = perftest.parse(argv, node.perftest_cuda)
        if isinstance(parsed, Printed):
            return parsed
        if parsed.server is None:
            return perftest.server(node, argv, self.meet, timeout_s)

        def rate(sim: SimNode, hca: SimHca, remote: SimNode | None, gpu: int | None,
                 remote_hca: str, remote_gpu: int | None) -> float:
            where = [remote.name] if remote is not None else []
            return perftest.nic_rate(sim, hca, remote, gpu, remote_hca, remote_gpu,
                                     self._noise(sim, attempt, "nic", hca.name, *where))

        return perftest.client(node, argv, self.meet, self.nodes, rate)

    def _dcgmi(self, node: SimNode, argv: list[str], env: Mapping[str, str],
               attempt: int, timeout_s: float) -> Printed:
        if argv[1:] == ["--version"]:
            return mndiag.version()
        if argv[1:2] == ["mndiag"]:
            return mndiag.run(self.nodes, argv)
        return dcgmi.run(node, argv, lambda *where: self._noise(node, attempt, *where))

    def _gpu_burn(self, node: SimNode, argv: list[str], env: Mapping[str, str],
                  attempt: int, timeout_s: float) -> Printed:
        noise = [self._noise(node, attempt, "burn", g.index) for g in node.gpus]
        return gpu_burn.run(node, argv, self.seed, attempt, noise)


def test_seconds(text: str) -> float:
    """How long the printed run took, for output whose stand-in did not say: nccl-tests
    rows (time in µs, both halves, warm-up and timed iterations), else nothing (0)."""
    total = 0.0
    iters = 25.0
    for line in text.splitlines():
        fields = line.split()
        if line.startswith("# nThread") and "iters:" in fields:
            iters = float(fields[fields.index("iters:") + 1]) + 5.0
        elif len(fields) == 13 and fields[0].isdigit() and fields[4] == "-1":
            try:
                total += (float(fields[5]) + float(fields[9])) * 1e-6 * iters
            except ValueError:
                continue
    return total


def all_reduce_group(group: list[SimNode], argv: list[str], env: Mapping[str, str],
                     seed: int, attempt: int) -> Printed:
    """all_reduce_perf as one MPI job over ``group`` (one rank per node, ``-g`` GPUs each):
    over the NICs (sim/bandwidth.py group_bandwidth), or, with ``NCCL_MNNVL_ENABLE=1`` on
    NVL72 trays, over multi-node NVLink — which needs every tray's IMEX channel (without
    one, exporting CUDA fabric memory is refused, CUDA_ERROR_NOT_PERMITTED, and so is
    the communicator: nccl_tests.nccl_failure)."""
    algo = env.get("NCCL_ALGO", "default")
    where = ",".join(n.name for n in group)
    mnnvl = env.get("NCCL_MNNVL_ENABLE") == "1" and all(n.profile.nvl72 for n in group)
    gpus = min(len(n.gpus) for n in group)
    if mnnvl:
        lost = next((n for n in group if not bw.imex_channel(n)), None)
        if lost is not None:
            return nccl_tests.nccl_failure(lost, nccl_tests.pid_of(lost, " ".join(argv)),
                                           "Cuda failure 800 'operation not permitted'")
        peak = bw.mnnvl_busbw(group) * bw.noise(seed, where, attempt, "mnnvl")
        return nccl_tests.group(group, argv, env,
                                lambda size, half: peak * size / (size + (32 << 20)), None,
                                [nccl_tests.comm_line(group, gpus, True)])
    band = bw.group_bandwidth(group, algo) * bw.noise(seed, where, attempt, "group", algo)
    network = "Socket" if any(n.socket_fallback for n in group) else "IB"
    return nccl_tests.group(group, argv, env,
                            lambda size, half: bw.group_busbw(group, algo, size, band),
                            network)


def simulated_cluster(arg: str, seed: int = 0,
                      rendezvous: Path | None = None) -> tuple[dict[str, SimNode], SimTools]:
    """The nodes of a simulation spec (a profile name or a spec file) and their tools."""
    nodes = {name: build(spec) for name, spec in load_spec(arg).nodes.items()}
    return nodes, SimTools(nodes, seed, rendezvous=rendezvous)
