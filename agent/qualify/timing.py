"""How long a qualification will take, estimated before it starts: the schedule ``qualify``
prints, checks against ``--budget`` and trims with ``--fit-budget``, and the simulated
duration ``bench/qualify_schedule.py`` divides clusterdiag's own time by.

A tool run costs its launch (ssh, srun or mpirun start-up), its set-up (NCCL's communicator,
growing with the ranks; a CUDA context; perftest's connection) and the tool's own work,
read from the very command line the planner builds (sizes, iterations, testcases, seconds)
at the profile's expected figure for that test; never more than the run's deadline, where
clusterdiag stops it. A node's tests run one after another; at most ``parallel_nodes``
nodes (or pairs of a round) run at once, each taking the next free slot. The rounds between
nodes are schedule.py's: one disjoint pairing, one second pass (the usual cost while fewer
than half the nodes are suspect), 2·log2 N scaling rounds, one rack round.

Every constant below says where its value comes from; "ours" marks an assumption of ours
where nothing published gives the figure. An estimate is no promise: it is what the
budget must allow for the schedule to find what it looks for.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ...checks.core.levels import Level
from ...checks.profiles.profile import Profile
from ...checks.qualify.active import (
    ACTIVE_TESTS,
    PAIRS,
    RACK,
    RAILS,
    SCALING,
    Invocation,
    Scope,
    fill,
)
from ...checks.qualify.judge import expectations
from .cross import CROSS_DEADLINES
from .inventory import Inventory, Rail
from .plan import NODE_TESTS, Step, iterations, node_steps
from .schedule import (
    GROUPS,
    has_rails,
    nvl72_racks,
    peer_groups,
    scaling_sizes,
)

# -- launching ------------------------------------------------------------------------------
# One command started on one node, by the way it is started (launch.py).
LAUNCH_S = {
    "local": 0.05,  # fork and exec (ours)
    "ssh": 0.5,  # a TCP connection, key exchange and authentication for every command:
    # BatchMode, no ControlMaster (launch.py remote_argv); half a second on a LAN (ours)
    "srun": 1.0,  # a job step: slurmctld grants it, slurmd sets it up (credential, cgroup),
    # then the task starts (ours)
}
# A job over several nodes (srun, or mpirun over ssh) reaches them through a tree of
# daemons: Slurm's TreeWidth defaults to 50, "over 2500 nodes can be contacted with two
# message hops" (slurm.conf(5), Slurm 22.05); Open MPI spawns its daemons over ssh as a tree
# too (ours: the same width). Each hop costs HOP_S (ours).
TREE_WIDTH = 50
HOP_S = 0.5
# How long each inventory command itself takes on the node (nvidia-smi starting NVML on
# every GPU is the slowest of them; ours).
INVENTORY_COMMAND_S = 0.5

# -- NCCL -----------------------------------------------------------------------------------
# Creating the communicator: 2.56 s on 8 ranks of one DGX B200 once its kernel loading is
# set aside (NVIDIA/nccl#1646 "Init timings": alloc 0.41, bootstrap 0.57, allgathers 0.08,
# topo 1.10, graphs 0.01, connections 0.39; nccl-tests#273 shows 0.66 s in all on 8 ranks:
# we take the longer) ...
NCCL_INIT_S = 2.5
# ... and it grows with the ranks: bootstrap's all-gather is a ring of N-1 steps over TCP
# (NVIDIA/nccl#1791), "2.5-minute init time at large scale (e.g. above certain K GPUs)"
# (NVIDIA/nccl#1156, default init path). Read as 150 s at 8,192 ranks (ours):
# (150 - 2.5) / 8192 = 0.018 s per rank.
NCCL_INIT_PER_RANK_S = 0.018
# nccl-tests (src/common.cu): every size from -b to -e by -f is first warmed up with -w
# collectives (common.cu:924-931), then measured out of place and in place (:939-940), each
# measurement one synchronising collective (:702-703), -n timed ones (:729) and one data
# check (datacheck = 1 by default, :96 and :803).
NCCL_EXTRA_PER_MEASURE = 2
SIZE_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}  # parsesize (common.cu:227-250)

# -- nvbandwidth (src/common.h, src/memcpy.cpp) ---------------------------------------------
NVB_BUFFER_BYTES = 512 << 20  # defaultBufferSize, 512 MiB (common.h:43)
NVB_LOOPS = 16  # defaultLoopCount (common.h:41)
NVB_SAMPLES = 3  # defaultAverageLoopCount, -i (common.h:44)
NVB_WARMUP = 4  # WARMUP_COUNT copies before each sample (memcpy.cpp:30, 431)
NVB_CONTEXT_S = 0.3  # a CUDA context on each GPU before its testcases (ours)

# -- gpu_burn (gpu_burn-drv.cpp) ------------------------------------------------------------
GPU_BURN_KILL_WAIT_S = 30.0  # after the burn it waits SIGTERM_TIMEOUT_THRESHOLD_SECS before
# reaping its workers (gpu_burn-drv.cpp:61, 620); clusterdiag does not pass -stts
GPU_BURN_START_S = 10.0  # allocating most of each GPU's memory and starting cuBLAS (ours)

# -- perftest -------------------------------------------------------------------------------
PERFTEST_SETUP_S = 2.0  # open the device, create the QPs, register the buffer (a CUDA context
# with --use_cuda), exchange over TCP (ours)

# -- DCGM (docs.nvidia.com/datacenter/dcgm, dcgmi diag; the Diagnostic plugin) --------------
DCGM_RUN_S = {
    "1": 30.0,  # "normally lasting seconds"
    "2": 120.0,  # "normally lasting approximately two minutes"
    "3": 900.0,  # "normally lasting approximately 15 minutes"
    "4": 3600.0,  # "extended": an hour (ours)
    "diagnostic": 180.0,  # the Diagnostic plugin's test_duration default, 180 s
}

# -- figures where the profile has none -----------------------------------------------------
# Below what any profile expects, so that an estimate without figures errs long (ours):
# nccl-tests' bus bandwidth below one NDR NIC's 46-48 GB/s (nccl-tests#290), a copy rate of
# PCIe Gen4 x16, HBM far below any GPU's, perftest at a quarter of NDR.
FALLBACK = {"nccl-tests": 40.0, "h2d": 25.0, "d2h": 25.0, "d2d": 25.0, "hbm": 500.0,
            "perftest": 100.0}
# A test between nodes without a figure of its own runs at the one of the same traffic.
SAME_TRAFFIC = {"scaling": "pairs", "allreduce_net": "pairs"}
GPUS = 8  # a node whose profile does not give its GPU count (ours: the usual HGX board)


@dataclass(frozen=True)
class RunTime:
    """One tool run: its launch, its set-up and its own work, in seconds."""

    launch_s: float
    setup_s: float
    work_s: float

    @property
    def seconds(self) -> float:
        return self.launch_s + self.setup_s + self.work_s


@dataclass(frozen=True)
class Stage:
    """One stage of the schedule: ``rounds`` one after another (waves of at most
    ``parallel_nodes`` for the node tests), ``runs`` tool runs in all."""

    group: str  # the --tests group it belongs to (schedule.GROUPS)
    name: str
    rounds: int
    runs: int
    seconds: float
    detail: str = ""


@dataclass(frozen=True)
class Schedule:
    nodes: int
    level: str
    via: str
    stages: tuple[Stage, ...]

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.stages)

    @property
    def runs(self) -> int:
        return sum(s.runs for s in self.stages)

    @property
    def groups(self) -> tuple[str, ...]:
        present = {s.group for s in self.stages}
        return tuple(g for g in GROUPS if g in present)

    def group_seconds(self, group: str) -> float:
        return sum(s.seconds for s in self.stages if s.group == group)

    def keep(self, groups: Collection[str]) -> Schedule:
        return replace(self, stages=tuple(s for s in self.stages if s.group in groups))

    def fit(self, budget_s: float) -> tuple[Schedule, list[str]]:
        """What fits ``budget_s``, taking the groups in their order (node tests first,
        then pairs, rails, scaling, rack) and leaving out each that would overrun; and the
        groups left out. The first group is the base of the rest (the node tests tell
        which nodes the tests between nodes leave out): where it does not fit, nothing
        does."""
        kept: list[str] = []
        dropped: list[str] = []
        total = 0.0
        for group in self.groups:
            cost = self.group_seconds(group)
            if (kept or not dropped) and total + cost <= budget_s:
                kept.append(group)
                total += cost
            else:
                dropped.append(group)
        return self.keep(kept), dropped

    def lines(self, budget_s: float | None = None) -> list[str]:
        """The schedule as ``qualify`` prints it before starting."""
        head = (f"qualify: {self.nodes} node{'s' * (self.nodes != 1)}, level {self.level}, "
                f"launched by {self.via}: the schedule, estimated")
        rows = [(s.group, s.name + (f" ({s.detail})" if s.detail else ""),
                 f"{s.rounds} {'wave' if s.group == 'node' else 'round'}"
                 f"{'s' * (s.rounds != 1)}", f"{s.runs} run{'s' * (s.runs != 1)}",
                 duration(s.seconds)) for s in self.stages]
        widths = [max((len(r[i]) for r in rows), default=0) for i in range(5)]
        out = [head]
        for row in rows:
            out.append("  " + "  ".join(
                cell.rjust(w) if i >= 2 else cell.ljust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=True))))
        total = f"  total: {self.runs} runs, about {duration(self.seconds)}"
        if budget_s is not None:
            total += f" (budget {duration(budget_s)})"
        return [*out, total]


def duration(seconds: float) -> str:
    """``42 s``, ``4 min 12 s``, ``2 h 5 min``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


# -- one run ---------------------------------------------------------------------------------

def launch_s(via: str, nodes: int = 1) -> float:
    """Starting one command on ``nodes`` nodes (one: a plain command; more: one job)."""
    hops = 0 if nodes <= 1 else max(1, math.ceil(math.log(nodes) / math.log(TREE_WIDTH)))
    return LAUNCH_S.get(via, LAUNCH_S["ssh"]) + HOP_S * hops


def figures(profile: Profile) -> dict[str, float]:
    """The figure each test runs at, in the unit its tool prints: the profile's expected
    figure, else its floor (``qualify:`` in checks/profiles/*.yaml); the local all-reduces
    without one at the profile's passive ``allreduce_busbw_gbps`` (the same nccl-tests
    bus bandwidth)."""
    out = {}
    if profile.allreduce_busbw_gbps:
        out["allreduce"] = out["allreduce_ring"] = float(profile.allreduce_busbw_gbps)
    for test, exp in expectations(profile).items():
        value = exp.expected if exp.expected is not None else exp.floor
        if value is not None and value > 0:
            out[test] = float(value)
    return out


def _rate(test: str, tool: str, rates: Mapping[str, float]) -> float:
    if test in rates:
        return rates[test]
    if SAME_TRAFFIC.get(test) in rates:
        return rates[SAME_TRAFFIC[test]]
    return FALLBACK.get(test, FALLBACK.get(tool, FALLBACK["nccl-tests"]))


def _option(argv: Sequence[str], flag: str, default: str) -> str:
    for i, arg in enumerate(argv[:-1]):
        if arg == flag:
            return argv[i + 1]
    return default


def _size(text: str) -> int:
    """nccl-tests' parsesize: a number with K, M or G (powers of 1024)."""
    unit = SIZE_UNITS.get(text[-1:].upper(), 1)
    number = text[:-1] if unit != 1 else text
    try:
        return int(float(number) * unit)
    except ValueError:
        return 1 << 30


def _int(text: str, default: int) -> int:
    return int(text) if text.isdigit() else default


def nccl_work_s(argv: Sequence[str], ranks: int, busbw_gbs: float) -> float:
    """all_reduce_perf's own time: every size's collectives at the bus bandwidth, which is
    the algorithm bandwidth times 2(n-1)/n (nccl-tests doc/PERFORMANCE.md)."""
    low = _size(_option(argv, "-b", "32M"))
    high = max(low, _size(_option(argv, "-e", "32M")))
    factor = max(2, _int(_option(argv, "-f", "2"), 2))
    warmup = _int(_option(argv, "-w", "1"), 1)  # warmup_iters (common.cu:97)
    iters = _int(_option(argv, "-n", "20"), 20)  # iters (common.cu:98)
    algbw = busbw_gbs * 1e9 / (2 * (ranks - 1) / ranks) if ranks > 1 else busbw_gbs * 1e9
    per_size = warmup + 2 * (iters + NCCL_EXTRA_PER_MEASURE)
    total = 0
    size = low
    while size <= high:
        total += size
        size *= factor
    return per_size * total / algbw


def nvbandwidth_work_s(argv: Sequence[str], gpus: int, rates: Mapping[str, float]) -> float:
    """Each testcase named after ``-t``: one copy measurement per GPU (host to device, device
    to host, within a GPU) or per ordered pair of GPUs (device to device), each
    NVB_SAMPLES samples of NVB_WARMUP + NVB_LOOPS copies of the buffer."""
    cases = []
    if "-t" in argv:
        for arg in argv[argv.index("-t") + 1:]:
            if arg.startswith("-"):
                break
            cases.append(arg)
    by_selector = {t.selector: t.id for t in ACTIVE_TESTS.values() if t.selector}
    bytes_each = NVB_SAMPLES * (NVB_WARMUP + NVB_LOOPS) * NVB_BUFFER_BYTES
    total = gpus * NVB_CONTEXT_S
    for case in cases:
        test = by_selector.get(case, case)
        copies = gpus * (gpus - 1) if "device_to_device" in case else gpus
        total += copies * bytes_each / (_rate(test, "nvbandwidth", rates) * 1e9)
    return total


def run_time(tool: str, test: str, argv: Sequence[str], *, via: str, nodes: int = 1,
             gpus: int = GPUS, rates: Mapping[str, float] | None = None) -> RunTime:
    """One run of ``argv`` (its parser ``tool``, its test or invocation name ``test``) over
    ``nodes`` nodes of ``gpus`` GPUs each."""
    rates = rates or {}
    start = launch_s(via, nodes)
    if tool == "nccl-tests":
        ranks = nodes * _int(_option(argv, "-g", str(gpus)), gpus)
        return RunTime(start, NCCL_INIT_S + NCCL_INIT_PER_RANK_S * ranks,
                       nccl_work_s(argv, ranks, _rate(test, tool, rates)))
    if tool == "nvbandwidth":
        return RunTime(start, 0.0, nvbandwidth_work_s(argv, gpus, rates))
    if tool == "gpu_burn":
        burn = next((float(a) for a in reversed(argv) if a.isdigit()), 10.0)
        return RunTime(start, GPU_BURN_START_S, burn + GPU_BURN_KILL_WAIT_S)
    if tool == "perftest":
        size = _int(_option(argv, "-s", "65536"), 65536)  # DEF_SIZE_BW (perftest_parameters.h)
        iters = _int(_option(argv, "-n", "5000"), 5000)  # DEF_ITERS_WB
        gbits = _rate(test, tool, rates)  # nic (loopback) or rails, Gb/s
        return RunTime(start, PERFTEST_SETUP_S, size * iters * 8 / (gbits * 1e9))
    if tool == "dcgmi":
        return RunTime(start, 0.0, DCGM_RUN_S.get(_option(argv, "-r", "2"), DCGM_RUN_S["2"]))
    return RunTime(start, 0.0, INVENTORY_COMMAND_S)


def makespan(durations: Iterable[float], workers: int) -> float:
    """How long jobs take on ``workers`` slots, each job in turn to the first free slot (a
    thread pool's order)."""
    slots: list[float] = []
    for seconds in durations:
        if len(slots) < max(1, workers):
            heapq.heappush(slots, seconds)
        else:
            heapq.heappush(slots, heapq.heappop(slots) + seconds)
    return max(slots, default=0.0)


# -- the node tests --------------------------------------------------------------------------

def stand_in(profile: Profile) -> Inventory:
    """What a node of ``profile`` will report, for planning before any node is asked: its
    GPUs, and one compute rail per GPU where the profile does not count them (ours)."""
    gpus = profile.gpu_count or GPUS
    rails = profile.compute_hcas if profile.compute_hcas is not None else gpus
    return Inventory(gpus=list(range(gpus)),
                     rails=[Rail(f"rail{i}", 1, i % gpus) for i in range(rails)],
                     perftest_cuda=True, gpu_burn_compare="/planned/compare.fatbin")


@dataclass(frozen=True)
class NodePlan:
    runs: int
    seconds: float  # the node's tests one after another, inventory included
    repeat_s: float  # the longest test the node may repeat


def _inventory_commands(inventory: Inventory, tests: Collection[str]) -> int:
    """agent/qualify/inventory.py take(): nvidia-smi and ibstat; topo -m where there are
    rails; perftest --help for the RDMA tests; which and readlink for gpu_burn."""
    count = 2
    if inventory.rails:
        count += 1 + bool({"nic", "rails"} & set(tests))
    return count + 2 * ("gpu_compute" in tests)


def step_seconds(step: Step, gpus: int, via: str, rates: Mapping[str, float]) -> float:
    """One planned step, stopped at its deadline at the latest."""
    cost = run_time(step.tool, step.test, step.argv, via=via, gpus=gpus, rates=rates)
    return min(cost.seconds, step.deadline_s)


def node_plan(profile: Profile, level: Level, settings: Mapping[str, Any],
              tests: frozenset[str], via: str) -> NodePlan:
    inventory = stand_in(profile)
    rates = figures(profile)
    gpus = len(inventory.gpus)
    steps = node_steps(inventory, level, settings, tests, profile.gpu_burn_doubles)
    costs = [step_seconds(s, gpus, via, rates) for s in steps]
    inventory_s = _inventory_commands(inventory, tests) * (launch_s(via) + INVENTORY_COMMAND_S)
    repeatable = [c for s, c in zip(steps, costs, strict=True)
                  if any(ACTIVE_TESTS[t].judging.repeat for t in s.tests if t in ACTIVE_TESTS)]
    return NodePlan(len(steps), inventory_s + sum(costs), max(repeatable, default=0.0))


# -- between nodes ---------------------------------------------------------------------------

def _allreduce_argv(invocation: Invocation, gpus: int, level: Level) -> tuple[str, ...]:
    """The command line cross.py runs (its iterations by level)."""
    return (invocation.program,
            *fill(invocation.argv, {"gpus": str(gpus), "iters": iterations(level)}))


@dataclass
class _Cross:
    profiles: Mapping[str, Profile]
    level: Level
    settings: Mapping[str, Any]
    via: str

    @property
    def workers(self) -> int:
        return max(1, int(self.settings.get("parallel_nodes", 256)))

    def deadline(self, test: str) -> float:
        given = self.settings.get("deadline_s") or {}
        return float(given.get(test, CROSS_DEADLINES[test]))

    def allreduce_s(self, test: str, invocation: Invocation, nodes: Sequence[str]) -> float:
        gpus = min(self.profiles[n].gpu_count or GPUS for n in nodes)
        cost = run_time("nccl-tests", test, _allreduce_argv(invocation, gpus, self.level),
                        via=self.via, nodes=len(nodes), gpus=gpus,
                        rates=figures(self.profiles[nodes[0]]))
        return min(cost.seconds, self.deadline(test))

    def rails_s(self, profile: Profile) -> float:
        argv = (RAILS.program, *fill(RAILS.argv, {"hca": "rail0", "port": "1",
                                                  "use_cuda": "", "tcp_port": "18515"}))
        cost = run_time("perftest", "rails", argv, via=self.via, rates=figures(profile))
        return min(cost.seconds, self.deadline("rails"))

    def pairwise(self, group: str, nodes: list[str], pair_s: float) -> list[Stage]:
        """A first pass over a disjoint pairing, then one second pass (when a pair is slow,
        and for the odd node out), as schedule.py pairs them."""
        pairs = len(nodes) // 2
        if pairs == 0:
            return []
        waves = math.ceil(pairs / self.workers)
        stages = [Stage(group, "first pass", 1, pairs, waves * pair_s,
                        f"{pairs} pair{'s' * (pairs != 1)}, "
                        f"{min(pairs, self.workers)} at a time")]
        second = (2 if len(nodes) >= 4 else 0) + len(nodes) % 2
        if second:
            stages.append(Stage(group, "second pass", 1, second, pair_s,
                                "suspects with known-good partners"))
        return stages


def _merge(stages: Iterable[Stage]) -> list[Stage]:
    """Stages of the same group and name (one per kind of node) as one: they run one kind
    after another."""
    out: dict[tuple[str, str], Stage] = {}
    for s in stages:
        was = out.get((s.group, s.name))
        out[(s.group, s.name)] = s if was is None else replace(
            was, rounds=was.rounds + s.rounds, runs=was.runs + s.runs,
            seconds=was.seconds + s.seconds, detail=f"{was.detail}; {s.detail}")
    return list(out.values())


def estimate(nodes: Sequence[str], profiles: Mapping[str, Profile], groups: Collection[str],
             level: Level, settings: Mapping[str, Any], via: str,
             racks: Mapping[str, Sequence[str]] | None = None) -> Schedule:
    """The schedule of ``groups`` (node, pairs, rails, scaling, rack) over ``nodes``, each
    stage with its rounds, runs and estimated seconds, as command.py and cross.py run it."""
    workers = max(1, int(settings.get("parallel_nodes", 256)))
    stages: list[Stage] = []
    if Scope.NODE.value in groups:
        plans = {p.name: node_plan(p, level, settings, frozenset(NODE_TESTS), via)
                 for p in {profiles[n].name: profiles[n] for n in nodes}.values()}
        per_node = [plans[profiles[n].name] for n in nodes]
        waves = math.ceil(len(nodes) / workers)
        stages.append(Stage("node", "node tests", waves, sum(p.runs for p in per_node),
                            makespan((p.seconds for p in per_node), workers),
                            f"{min(len(nodes), workers)} node{'s' * (len(nodes) != 1)} "
                            f"at a time"))
        if settings.get("repeat", True) and per_node:
            stages.append(Stage("node", "repeat of a suspect test", 1, 1,
                                max(p.repeat_s for p in per_node), "when one is"))
    cross = _Cross(profiles, level, settings, via)
    kinds = peer_groups(list(nodes), profiles)
    found: list[Stage] = []
    for kind in kinds:
        if "pairs" in groups and len(kind) >= 2:
            found += cross.pairwise("pairs", kind, cross.allreduce_s("pairs", PAIRS,
                                                                      kind[:2]))
        railed = [n for n in kind if has_rails(profiles[n])]
        if "rails" in groups and len(railed) >= 2:
            found += cross.pairwise("rails", railed, cross.rails_s(profiles[railed[0]]))
    for kind in kinds:
        sizes = scaling_sizes(len(kind))
        if "scaling" in groups and sizes:
            seconds = sum(cross.allreduce_s("scaling", SCALING, kind[:size]) for size in sizes)
            found.append(Stage("scaling", "Ring and NCCL's default at "
                               + ", ".join(map(str, sizes)) + " nodes", 2 * len(sizes),
                               2 * len(sizes), 2 * seconds))
    chosen = nvl72_racks(racks or {}, {n: profiles[n] for n in nodes})
    chosen = {r: t for r, t in chosen.items() if len(t) >= 2}
    if "rack" in groups and chosen:
        trays = [t for members in chosen.values() for t in members]
        found.append(Stage("rack", "IMEX channel of every tray", 1, len(trays),
                           math.ceil(len(trays) / workers)
                           * (launch_s(via) + INVENTORY_COMMAND_S)))
        found.append(Stage("rack", "all-reduce over each rack", 1, len(chosen), makespan(
            (cross.allreduce_s("rack", RACK, t) for t in chosen.values()), workers)))
    return Schedule(len(nodes), level.value, via, (*stages, *_merge(found)))
