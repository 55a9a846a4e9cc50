"""The active tests, each declared once: what ``clusterdiag qualify`` runs, how, what it reads
of the output, in which unit, against what, with which action, and the simulated fault that
trips it.

A passive check is one ``@check``; an active test is one :class:`ActiveTest` here. The
planner (agent/qualify/plan.py, cross.py) builds each tool's command line from its
:class:`Invocation`; the runner and ``--from-logs`` map what a parser read to the test by
its ``figure``; the judge (judge.py, cross.py) takes its name, action and rules from here;
the config and site profiles may name only the ids declared here (``qualify:`` keys,
``qualify.deadline_s``); ``checks list|explain`` and docs/checks.md show it; and the fault
matrix holds every test to a simulated fault that trips it.

Adding a test: declare it below (an nvbandwidth variant is one more :class:`ActiveTest`
with ``NVBANDWIDTH`` and its testcase as ``selector``: the run of the other copy tests then
runs it too), give the simulator its figure and a fault kind that slows it
(agent/sim/bandwidth.py, agent/sim/faults/catalog.py), and, where a published figure
exists, its expectation in the platform profiles (``qualify.<id>``, same unit, a source).

Units are the unit the tool prints, never converted: nccl-tests' bus bandwidth, perftest's
``--report_gbits``, nvbandwidth's copy rate (bytes copied once per second: a copy reads and
writes each byte, so HBM moves twice the figure; nvbandwidth src/memcpy.cpp:483 and
NVIDIA/nvbandwidth#48), gpu-burn's Gflop/s. An expected value or floor is in that same unit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..core.finding import Action, StrEnum


class Scope(StrEnum):
    """Where a test runs: on each node alone, or between nodes."""

    NODE = "node"
    PAIRS = "pairs"
    RAILS = "rails"
    SCALING = "scaling"
    RACK = "rack"


@dataclass(frozen=True)
class Invocation:
    """How one tool run is started. ``argv`` follows the program (``qualify.tools.<program>``
    or the program on PATH); a ``{name}`` the planner fills (``gpus``, ``iters``, ...); an
    argument that fills to nothing is left out; ``{selectors}`` becomes the ``selector`` of
    every test the run serves, in declaration order."""

    name: str
    program: str
    parser: str  # agent/qualify/parsers: nccl-tests | nvbandwidth | gpu_burn | perftest | dcgmi
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    deadline_s: float = 300.0
    install: str = ""  # what a missing program's skip says
    source: str = ""  # where the arguments come from


@dataclass(frozen=True)
class Judging:
    """How a figure is judged: against the profile's floor, against the same part of peers of
    the same profile (the straggler rule), whether a suspect is measured once more before it
    is convicted, and whether a whole cluster below the profile's expected figure is a
    cluster-level finding."""

    floor: bool = True
    peers: bool = True
    repeat: bool = True
    expected: bool = True


@dataclass(frozen=True)
class ActiveTest:
    id: str  # its findings' check id is qualify.<id>
    summary: str
    scope: Scope
    invocation: Invocation
    figure: str  # what of the output is the figure (see the parser named by the invocation)
    unit: str  # as the tool prints it
    counts: str  # what the unit counts, with its source
    action: Action  # a fail's action
    fault: str  # the simulated fault kind that trips it (agent/sim/faults/catalog.py)
    selector: str = ""  # the testcase the run is asked for, where the tool takes one
    alternates: tuple[str, ...] = ()  # figures read instead where ``figure`` is absent (a log)
    judging: Judging = Judging()
    needs_rails: bool = False  # runs only on a node with compute rails (InfiniBand ports)
    min_nodes: int = 1
    expectation: str = ""  # the profile's qualify key it is judged against, where not its id

    @property
    def expected_key(self) -> str:
        return self.expectation or self.id

    @property
    def check_id(self) -> str:
        return f"qualify.{self.id}"


NCCL_TESTS = ("build nccl-tests (github.com/NVIDIA/nccl-tests, `make`; `make MPI=1` for the "
              "tests between nodes) and put build/ on PATH, or set "
              "qualify.tools.all_reduce_perf")
_ALLREDUCE_ARGV = ("-b", "1G", "-e", "8G", "-f", "2", "-g", "{gpus}", "-w", "5", "-n",
                   "{iters}")
_ALLREDUCE_SOURCE = ("all_reduce_perf over every local GPU in one process, 1 GiB to 8 GiB "
                     "(the NVLS curve still rises below 1 GiB, nccl-tests#212), as AzNHC, "
                     "GCM and SuperBench run it")
_INFO = (("NCCL_DEBUG", "INFO"), ("NCCL_DEBUG_SUBSYS", "INIT,NET"))
ALLREDUCE = Invocation("allreduce", "all_reduce_perf", "nccl-tests", _ALLREDUCE_ARGV,
                       install=NCCL_TESTS, source=_ALLREDUCE_SOURCE)
ALLREDUCE_RING = Invocation("allreduce_ring", "all_reduce_perf", "nccl-tests", _ALLREDUCE_ARGV,
                            (("NCCL_ALGO", "Ring"),), install=NCCL_TESTS,
                            source="the same with NCCL_ALGO=Ring: the plain NVLink ring")
ALLREDUCE_NET = Invocation(
    "allreduce_net", "all_reduce_perf", "nccl-tests", _ALLREDUCE_ARGV,
    (("NCCL_P2P_DISABLE", "1"), ("NCCL_SHM_DISABLE", "1"), ("NCCL_NET_GDR_LEVEL", "5"),
     *_INFO), install=NCCL_TESTS,
    source="P2P and SHM off so the traffic goes through the node's own NICs (AzNHC's "
           "ib_loopback); NCCL_DEBUG=INFO shows which network NCCL chose")
NVBANDWIDTH = Invocation(
    "nvbandwidth", "nvbandwidth", "nvbandwidth", ("-t", "{selectors}"),
    install="build nvbandwidth (github.com/NVIDIA/nvbandwidth) or set "
            "qualify.tools.nvbandwidth",
    source="nvbandwidth's copy-engine testcases, all in one run (-t takes several: "
           "nvbandwidth.cpp's multitoken testcase option)")
GPU_BURN = Invocation(
    "gpu_compute", "gpu_burn", "gpu_burn", ("{precision}", "-tc", "-c", "{compare}", "{burn_s}"),
    deadline_s=120.0,
    install="build gpu-burn (github.com/wilicc/gpu-burn) or set qualify.tools.gpu_burn "
            "(and qualify.tools.gpu_burn_compare, its compare.fatbin)",
    source="doubles and tensor cores (SuperBench's gpu-burn run; TF32 where the profile's "
           "gpu_burn_doubles is false); -c names the compare "
           "kernel, which gpu_burn otherwise looks for in its working directory "
           "(gpu_burn-drv.cpp:33, 821), and the seconds come last (gpu_burn-drv.cpp:912)")
DCGM_DIAGNOSTIC = Invocation(
    "gpu_compute", "dcgmi", "dcgmi", ("diag", "-r", "diagnostic", "-j"), deadline_s=1800.0,
    install="install DCGM (datacenter-gpu-manager) and start nv-hostengine",
    source="DCGM's FP64 diagnostic test, where gpu_burn is not installed")
PERFTEST_LOOPBACK = Invocation(
    "nic", "ib_write_bw", "perftest",
    ("-d", "{hca}", "-i", "{port}", "{use_cuda}", "-s", "8388608", "-n", "2000", "-F",
     "--report_gbits", "-p", "{tcp_port}"), deadline_s=120.0,
    install="install perftest (apt install perftest; --use_cuda needs a build with CUDA, "
            "else the test uses host memory and says so) or set qualify.tools.ib_write_bw",
    source="ib_write_bw same-host loopback per compute rail, 8 MiB messages, "
           "--report_gbits, GPU memory through --use_cuda where the build has it (AzNHC's "
           "GDR check)")
DCGM = Invocation("dcgm", "dcgmi", "dcgmi", ("diag", "-r", "{dcgm_level}", "-j"),
                  deadline_s=1800.0,
                  install="install DCGM (datacenter-gpu-manager) and start nv-hostengine",
                  source="dcgmi diag -r 2 (quick) or -r 3 (full), JSON")
PAIRS = Invocation("pairs", "all_reduce_perf", "nccl-tests", _ALLREDUCE_ARGV,
                   (("NCCL_ALGO", "Ring"), *_INFO), install=NCCL_TESTS,
                   source="all_reduce_perf over two nodes, every GPU of each, one MPI job; "
                          "Ring, since on two nodes NCCL's default picks Tree/NVLSTree, "
                          "whose busbw goes beyond the network (nccl-tests#196)")
RAILS = Invocation(
    "rails", "ib_write_bw", "perftest",
    ("-d", "{hca}", "-i", "{port}", "{use_cuda}", "-s", "8388608", "-n", "2000", "-F",
     "--report_gbits", "-p", "{tcp_port}"), deadline_s=120.0,
    install=PERFTEST_LOOPBACK.install,
    source="ib_write_bw from rail i of one node to rail i of its partner, every rail of a "
           "pair at once on its own port")
SCALING = Invocation("scaling", "all_reduce_perf", "nccl-tests", _ALLREDUCE_ARGV,
                     deadline_s=600.0, install=NCCL_TESTS,
                     source="all_reduce_perf over 2, 4, 8 ... N nodes, Ring and NCCL's "
                            "default at each size")
RACK = Invocation("rack", "all_reduce_perf", "nccl-tests", _ALLREDUCE_ARGV,
                  (("NCCL_MNNVL_ENABLE", "1"), *_INFO), deadline_s=600.0, install=NCCL_TESTS,
                  source="all_reduce_perf over every GPU of an NVL72 rack with "
                         "NCCL_MNNVL_ENABLE=1 (multi-node NVLink)")

_BUSBW = ("nccl-tests' bus bandwidth, GB/s (10^9 bytes/s): the algorithm bandwidth times "
          "the collective's factor, 2(n-1)/n for all-reduce (nccl-tests doc/PERFORMANCE.md); "
          "the best in-place or out-of-place figure at the largest size")
_COPY = ("nvbandwidth's copy rate, GB/s (10^9 bytes/s): bytes copied once per second "
         "(src/memcpy.cpp:483), one direction over the link")
_GBITS = "perftest's BW average with --report_gbits, Gb/s (10^9 bits/s)"

_TESTS = (
    ActiveTest("allreduce", "local all-reduce bus bandwidth (default algorithm)", Scope.NODE,
               ALLREDUCE, "busbw", "GB/s", _BUSBW, Action.DRAIN, "tool_hang"),
    ActiveTest("allreduce_ring", "local all-reduce bus bandwidth (NCCL_ALGO=Ring)",
               Scope.NODE, ALLREDUCE_RING, "busbw", "GB/s", _BUSBW, Action.DRAIN,
               "tool_hang"),
    ActiveTest("allreduce_net", "all-reduce through the node's NICs (P2P and SHM off)",
               Scope.NODE, ALLREDUCE_NET, "busbw", "GB/s", _BUSBW, Action.DRAIN,
               "nccl_socket_fallback", needs_rails=True),
    ActiveTest("h2d", "host-to-device copy bandwidth", Scope.NODE, NVBANDWIDTH,
               "host_to_device_memcpy_ce", "GB/s", _COPY, Action.DRAIN, "pcie_slow",
               selector="host_to_device_memcpy_ce", alternates=("host_to_device_memcpy_sm",)),
    ActiveTest("d2h", "device-to-host copy bandwidth", Scope.NODE, NVBANDWIDTH,
               "device_to_host_memcpy_ce", "GB/s", _COPY, Action.DRAIN, "pcie_slow",
               selector="device_to_host_memcpy_ce", alternates=("device_to_host_memcpy_sm",)),
    ActiveTest("d2d", "device-to-device copy bandwidth", Scope.NODE, NVBANDWIDTH,
               "device_to_device_memcpy_read_ce", "GB/s",
               _COPY + "; a GPU's figure is the median of every pair it is in",
               Action.DRAIN, "nvlink_slow", selector="device_to_device_memcpy_read_ce",
               alternates=("device_to_device_memcpy_write_ce",)),
    ActiveTest("hbm", "GPU memory copy bandwidth", Scope.NODE, NVBANDWIDTH,
               "device_local_copy", "GB/s",
               "nvbandwidth's copy rate within one GPU's memory, GB/s: bytes copied once per "
               "second (src/memcpy.cpp:483); each byte is read and written, so the memory "
               "moves twice the figure (NVIDIA/nvbandwidth#48)", Action.DRAIN, "hbm_slow",
               selector="device_local_copy"),
    ActiveTest("gpu_compute", "GPU compute throughput", Scope.NODE, GPU_BURN, "Gflop/s",
               "Gflop/s", "gpu-burn's Gflop/s per GPU on its last progress line "
               "(gpu_burn-drv.cpp:519-531), or DCGM's FP64 diagnostic figure",
               Action.DRAIN, "gpu_slow"),
    ActiveTest("nic", "RDMA bandwidth of the rail (same-host loopback)", Scope.NODE,
               PERFTEST_LOOPBACK, "bw_average", "Gb/s", _GBITS, Action.RESEAT_CABLE,
               "rail_slow", needs_rails=True),
    ActiveTest("dcgm", "DCGM diagnostic", Scope.NODE, DCGM, "", "", "pass or fail per plugin "
               "and GPU (no figure)", Action.DRAIN, "dcgm_plugin_fail",
               judging=Judging(floor=False, peers=False, repeat=False, expected=False)),
    ActiveTest("pairs", "two-node all-reduce bus bandwidth (NCCL_ALGO=Ring)", Scope.PAIRS,
               PAIRS, "busbw", "GB/s", _BUSBW, Action.DRAIN, "node_uplink_slow", min_nodes=2),
    ActiveTest("rails", "RDMA bandwidth rail to rail between two nodes", Scope.RAILS, RAILS,
               "bw_average", "Gb/s", _GBITS, Action.RESEAT_CABLE, "cable_slow",
               needs_rails=True, min_nodes=2),
    ActiveTest("scaling", "all-reduce scaling (NCCL_ALGO=Ring, 2 to N nodes)",
               Scope.SCALING, SCALING, "busbw", "GB/s", _BUSBW, Action.INVESTIGATE,
               "uplink_slow", judging=Judging(repeat=False), min_nodes=4,
               expectation="pairs"),
    ActiveTest("rack", "rack-wide all-reduce over multi-node NVLink", Scope.RACK, RACK,
               "busbw", "GB/s", _BUSBW, Action.DRAIN, "mnnvl_slow", min_nodes=2),
)
ACTIVE_TESTS: dict[str, ActiveTest] = {t.id: t for t in _TESTS}
"""Every active test by id, in the order a qualification runs them."""
INVOCATIONS: dict[str, Invocation] = {t.invocation.name: t.invocation for t in _TESTS}
FALLBACKS: dict[str, Invocation] = {"gpu_compute": DCGM_DIAGNOSTIC}
"""What runs instead of a test's invocation when its program is not installed."""


def node_tests() -> tuple[ActiveTest, ...]:
    return tuple(t for t in _TESTS if t.scope is Scope.NODE)


def cross_tests() -> tuple[ActiveTest, ...]:
    return tuple(t for t in _TESTS if t.scope is not Scope.NODE)


def served_by(invocation: Invocation) -> Iterator[ActiveTest]:
    """The tests whose figures one run of ``invocation`` gives."""
    return (t for t in _TESTS if t.invocation is invocation)


def figures_for(invocation: str, read: set[str]) -> dict[str, str]:
    """Which of the figure keys ``read`` from a run of ``invocation`` each test takes: its own
    figure, else the first of its alternates that was read (an older tool's name for it)."""
    out = {}
    for t in _TESTS:
        if t.invocation.name == invocation and t.figure:
            key = next((k for k in (t.figure, *t.alternates) if k in read), None)
            if key is not None:
                out[key] = t.id
    return out


def fill(argv: tuple[str, ...], values: dict[str, str]) -> tuple[str, ...]:
    """``argv`` with each ``{name}`` replaced; an argument that fills to nothing is left
    out, and ``{selectors}`` (a space-separated list in ``values``) becomes one argument
    each. A name with no value is a programming error (KeyError)."""
    out: list[str] = []
    for arg in argv:
        if arg == "{selectors}":
            out.extend(values["selectors"].split())
            continue
        filled = arg.format(**values)
        if filled:
            out.append(filled)
    return tuple(out)
