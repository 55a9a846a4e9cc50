"""nvbandwidth v0.8 as it prints (NVIDIA/nvbandwidth @ 66746a3bef61, extracted under
/tmp/research/src/nvbandwidth; real output NVIDIA/nvbandwidth#48, v0.8 on 8x H20-3e).

Order (file:line): the version lines (output.cpp:31-32), the CUDA and driver versions
(output.cpp:49-51; both CUDA lines print the driver's version, nvbandwidth.cpp:278-285),
the host name and one ``Device N: name (dddddddd:bb:dd)`` line per CUDA ordinal with
lower-case hex (output.cpp:79-97, 159-165), then per testcase ``Running <key>.``
(output.cpp:177), its description (testcases_ce.cpp:36, 50, 112, 225), the matrix
(inline_common.h:64-101: two spaces, columns ``setw(10)``, rows ``setw(2)``, fixed two
decimals, ``N/A``), a blank line, ``SUM <key> <sum>`` (inline_common.h:107) and a blank
line; a name it does not know is ``ERROR: Testcase X not found!`` and the run goes on
(nvbandwidth.cpp:129, 154); a testcase without accessible peers is ``Waived: ``
(nvbandwidth.cpp:159-161, output.cpp:179); the closing NOTE (output.cpp:44-45).

Units: GB/s = bytes copied x loops / elapsed x 1e-9 (memcpy.cpp:483, 341-347), so
``device_local_copy`` is a copy rate: each byte counted once though the copy reads and
writes it (sim/bandwidth.py ``Rates.hbm``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

from . import bandwidth as bw
from .state.hardware import SimNode
from .toolkit import NotModelled, Printed, loader_error

VERSION = "v0.8"  # version.h
# nvbandwidth.cpp:63-115 createTestcases, as `nvbandwidth -l` lists them (index = place).
TESTCASES = (
    "host_to_device_memcpy_ce", "device_to_host_memcpy_ce",
    "host_to_device_bidirectional_memcpy_ce", "device_to_host_bidirectional_memcpy_ce",
    "device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce",
    "device_to_device_bidirectional_memcpy_read_ce",
    "device_to_device_bidirectional_memcpy_write_ce", "all_to_host_memcpy_ce",
    "all_to_host_bidirectional_memcpy_ce", "host_to_all_memcpy_ce",
    "host_to_all_bidirectional_memcpy_ce", "all_to_one_write_ce", "all_to_one_read_ce",
    "one_to_all_write_ce", "one_to_all_read_ce", "host_to_device_memcpy_sm",
    "device_to_host_memcpy_sm", "host_to_device_bidirectional_memcpy_sm",
    "device_to_host_bidirectional_memcpy_sm", "device_to_device_memcpy_read_sm",
    "device_to_device_memcpy_write_sm", "device_to_device_bidirectional_memcpy_read_sm",
    "device_to_device_bidirectional_memcpy_write_sm", "all_to_host_memcpy_sm",
    "all_to_host_bidirectional_memcpy_sm", "host_to_all_memcpy_sm",
    "host_to_all_bidirectional_memcpy_sm", "all_to_one_write_sm", "all_to_one_read_sm",
    "one_to_all_write_sm", "one_to_all_read_sm", "host_device_latency_sm",
    "device_to_device_latency_sm", "device_local_copy")
# nvbandwidth.cpp:101-113: the testcases a -DMULTINODE=1 build adds after the others.
MULTINODE_TESTCASES = (
    "multinode_device_to_device_memcpy_read_ce", "multinode_device_to_device_memcpy_write_ce",
    "multinode_device_to_device_bidirectional_memcpy_read_ce",
    "multinode_device_to_device_bidirectional_memcpy_write_ce",
    "multinode_device_to_device_memcpy_read_sm", "multinode_device_to_device_memcpy_write_sm",
    "multinode_device_to_device_bidirectional_memcpy_read_sm",
    "multinode_device_to_device_bidirectional_memcpy_write_sm",
    "multinode_device_to_device_all_to_one_write_sm",
    "multinode_device_to_device_all_from_one_read_sm",
    "multinode_device_to_device_broadcast_one_to_all_sm",
    "multinode_device_to_device_broadcast_all_to_all_sm", "multinode_bisect_write_ce")
MULTINODE_READ = MULTINODE_TESTCASES[0]
# What output.cpp:35-39 prints after "MPI version: ": MPI_Get_library_version, which Open
# MPI writes as "Open MPI v<x.y.z>, package: <package>, ident: <ident>, repo rev: <rev>,
# <date>" (ompi/mpi/c/get_library_version.c); the package string and date are assumed.
MPI_VERSION = ("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, "
               "May 26, 2022")
# Boost's rendering of the visible options (research runs/nvb_fakedrv_help.txt).
OPTIONS_TEXT = (
    "nvbandwidth CLI:\n"
    "  -h [ --help ]                  Produce help message\n"
    "  -b [ --bufferSize ] arg (=512) Memcpy buffer size in MiB\n"
    "  -l [ --list ]                  List available testcases\n"
    "  -t [ --testcase ] arg          Testcase(s) to run (by name or index)\n"
    "  -p [ --testcasePrefixes ] arg  Testcase(s) to run (by prefix))\n"
    "  -v [ --verbose ]               Verbose output\n"
    "  -s [ --skipVerification ]      Skips data verification after copy\n"
    "  -d [ --disableAffinity ]       Disable automatic CPU affinity control\n"
    "  -i [ --testSamples ] arg (=3)  Iterations of the benchmark\n"
    "  -m [ --useMean ]               Use mean instead of median for results\n"
    "  -j [ --json ]                  Print output in json format instead of plain \n"
    "                                 text.\n")
NOTE = ("NOTE: The reported results may not reflect the full capabilities of the platform.\n"
        "Performance can vary with software drivers, hardware clocks, and system topology.\n")
# nvbandwidth.cpp:206-224: long name -> (short, takes values, many values).
_OPTIONS = {"help": ("h", False, False), "bufferSize": ("b", True, False),
            "list": ("l", False, False), "testcase": ("t", True, True),
            "testcasePrefixes": ("p", True, True), "verbose": ("v", False, False),
            "skipVerification": ("s", False, False), "disableAffinity": ("d", False, False),
            "testSamples": ("i", True, False), "useMean": ("m", False, False),
            "json": ("j", False, False), "loopCount": ("", True, False),
            "perfFormatter": ("", False, False)}
_SHORT = {short: long for long, (short, _, _) in _OPTIONS.items() if short}
_LOOPS, _SAMPLES, _MIB = 16, 3, 1 << 20  # common.h:41-44



def _parse(argv: list[str]) -> dict[str, list[str]] | None:
    """Boost program_options' command-line parse; None where Boost throws (an unknown
    option, a missing value, a stray positional token)."""
    seen: dict[str, list[str]] = {}
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
        elif arg.startswith("-") and len(arg) > 1:
            name, value = _SHORT.get(arg[1], ""), arg[2:]
            eq = "=" if value else ""
        else:
            return None  # no positional options are declared
        if name not in _OPTIONS:
            return None
        _, takes, many = _OPTIONS[name]
        values = seen.setdefault(name, [])
        if not takes:
            if eq:
                return None
            i += 1
            continue
        if eq:
            values.append(value)
        i += 1
        while i < len(argv) and not argv[i].startswith("-") and (many or not values):
            values.append(argv[i])
            i += 1
        if not values:
            return None
        if name in ("bufferSize", "testSamples", "loopCount") and (
                len(values) > 1 or not values[0].isdigit()):
            return None
    return seen


def _version(node: SimNode | None = None) -> str:
    """output.cpp:31-32, and the MPI library's line of a multinode build (:34-40)."""
    mpi = f"MPI version: {MPI_VERSION}\n" if node is not None and multinode_build(node) else ""
    return f"nvbandwidth Version: {VERSION}\nBuilt from Git version: {VERSION}\n\n" + mpi


def device_display(node: SimNode, index: int) -> str:
    """output.cpp:79-97: the name and dddddddd:bb:dd, lower-case hex."""
    gpu = node.gpus[index]
    domain, bus, rest = gpu.bdf.split(":")
    return (f"{gpu.name} ({int(domain, 16):08x}:{int(bus, 16):02x}:"
            f"{int(rest.split('.')[0], 16):02x})")


def matrix(key: str, rows: list[list[float | None]]) -> str:
    """inline_common.h:55-108 without row or column labels, then the blank line of
    Output::addTestcaseResults (output.cpp:188-191)."""
    columns = len(rows[0])
    lines = ["  " + "".join(f"{c:>10}" for c in range(columns))]
    total = 0.0
    for index, row in enumerate(rows):
        cells = "".join(f"{'N/A':>10}" if v is None else f"{v:>10.2f}" for v in row)
        total += sum(v for v in row if v is not None)
        lines.append(f"{index:>2}{cells}")
    return "\n".join(lines) + f"\n\nSUM {key} {total:.2f}\n\n"


def run(node: SimNode, argv: list[str], noise: Callable[..., float]) -> Printed:
    """The stand-in: ``noise(*where)`` is the run-to-run factor of one figure."""
    for library in ("libnvidia-ml.so.1", "libcuda.so.1"):
        if library in node.missing_libraries:
            return loader_error(argv[0], library)
    options = _parse(argv)
    if options is None:
        # nvbandwidth.cpp:227-245: the version, the argv echoed, the options; exit 1.
        echo = "".join(f"{a} " for a in argv)
        return Printed(_version(node) + f"ERROR: Invalid Arguments \n{echo}:\n\n{OPTIONS_TEXT}\n",
                       code=1)
    if "help" in options:
        return Printed(_version(node) + OPTIONS_TEXT + "\n")
    if "list" in options:
        return Printed(_version(node) + listing(multinode_build(node)))
    for name in ("verbose", "json", "perfFormatter", "loopCount"):
        if name in options:
            raise NotModelled(f"nvbandwidth --{name} is not simulated")
    if int((options.get("bufferSize") or ["512"])[0]) < 512:
        raise NotModelled("nvbandwidth -b below the default is not simulated")
    wanted, prefixes = options.get("testcase", []), options.get("testcasePrefixes", [])
    if wanted and prefixes:
        return Printed(_version(node), "You cannot specify both testcase and testcasePrefix "
                                   "options at the same time\n", 1)
    out = [_version(node), _driver(node)]
    if multinode_build(node):  # one process, run without mpirun (output.cpp:167-173)
        out.append(process_lines([(node, 0)]))
    else:
        out.append(f"{node.name}\n")
        out += [f"Device {g.index}: {device_display(node, g.index)}\n" for g in node.gpus]
        out.append("\n")
    if prefixes:
        wanted = [k for k in TESTCASES if any(k.startswith(p) for p in prefixes)]
        if not wanted:
            return Printed("".join(out), "Specified list of testcase prefixes did not match "
                                         "any testcases\n", 1)
    seconds = 0.0
    for ident in wanted or list(TESTCASES):
        key = _find(ident)
        if key.startswith("ERROR: "):
            out.append(key + "\n")  # output.cpp:179 with status "ERROR"
            continue
        text, took = _testcase(node, key, noise)
        out.append(text)
        seconds += took
    out.append(NOTE + "\n")
    return Printed("".join(out), seconds=seconds)


def _driver(node: SimNode) -> str:
    """output.cpp:48-52: both CUDA lines print the driver's version (nvbandwidth.cpp:278-285)."""
    return (f"CUDA Runtime Version: {node.cuda_version}\nCUDA Driver Version: "
            f"{node.cuda_version}\nDriver Version: {node.driver_version}\n\n")


def multinode_build(node: SimNode) -> bool:
    """The simulated NVL72 trays' nvbandwidth is built with ``-DMULTINODE=1`` (its README,
    "Multinode benchmarks"), the only build that has the multinode testcases; other nodes
    have the single-node build."""
    return node.profile.nvl72


def listing(multinode: bool) -> str:
    """``--list``: output.cpp:70-77, every testcase of createTestcases in order
    (nvbandwidth.cpp:63-114; the multinode ones only in a multinode build) with the
    description testcase.h gives it (agent/sim/tool-texts.yaml)."""
    texts = yaml.safe_load((Path(__file__).parent / "tool-texts.yaml").read_text())
    described: dict[str, str] = texts["nvbandwidth_testcases"]
    keys = TESTCASES + (MULTINODE_TESTCASES if multinode else ())
    return "Index, Name:\n\tDescription\n=======================\n" + "".join(
        f"{i}, {key}:\n{described[key]}\n\n" for i, key in enumerate(keys))


def process_lines(ranks: list[tuple[SimNode, int]]) -> str:
    """output.cpp:151-155: ``Process <rank> (<host>): device <ordinal>: <device>`` per rank,
    the rank right-aligned to the digits of ``worldSize - 1`` (common.h:210-216; with one
    process the width is not positive and nothing pads), then a blank line."""
    width = len(str(len(ranks) - 1)) if len(ranks) > 1 else 0
    return "".join(f"Process {rank:>{width}} ({node.name}): device {gpu}: "
                   f"{device_display(node, gpu)}\n"
                   for rank, (node, gpu) in enumerate(ranks)) + "\n"


def multinode(trays: list[SimNode], per_node: int, argv: list[str],
              noise: Callable[..., float]) -> Printed:
    """Rank 0's output of ``nvbandwidth -t multinode_device_to_device_memcpy_read_ce`` run
    by MPI as ``per_node`` processes on each of ``trays``, ranks filling a tray before the
    next (``--map-by ppr:<n>:node``, ``srun --ntasks-per-node``), each rank on the GPU its
    local rank names (output.cpp:113-123). No real capture of a multinode run exists in the
    shared data set: every line follows its format string (file:line above and below).

    The read testcase copies from the column's GPU to the row's with the row's context
    (multinode_testcases.cpp:29-46), every ordered pair one after the other; a copy between
    two trays crosses the NVLink switch trays as one inside a tray does (hardware.md: 18 x
    NVLink5 per GPU, to the rack's switch trays), so it is the platform's GPU-to-GPU rate
    (sim/bandwidth.py), slowed by either GPU's ``nvlink`` or ``mnnvl_gpu`` factor."""
    options = _parse(argv)
    if options is None or set(options) != {"testcase"} or \
            options["testcase"] != [MULTINODE_READ] or not all(map(multinode_build, trays)):
        raise NotModelled(f"nvbandwidth {' '.join(argv[1:])} under MPI is not simulated")
    ranks = [(tray, gpu) for tray in trays for gpu in range(per_node)]
    if any(gpu >= len(tray.gpus) for tray, gpu in ranks):
        raise NotModelled("more nvbandwidth processes than GPUs on a tray is not simulated")
    head = trays[0]

    def rate(a: tuple[SimNode, int], b: tuple[SimNode, int]) -> float:
        slowest = min(bw.factor(n, part, g) for n, g in (a, b) for part in ("nvlink",
                                                                          "mnnvl_gpu"))
        return bw.rates(head).nvlink * slowest * noise(MULTINODE_READ, a[0].name, a[1],
                                                       b[0].name, b[1])

    rows: list[list[float | None]] = [[None if a == b else rate(a, b) for b in ranks]
                                      for a in ranks]
    size = 512 * _MIB * _LOOPS * _SAMPLES
    seconds = sum(size / (v * 1e9) for row in rows for v in row if v)
    return Printed(_version(head) + _driver(head) + process_lines(ranks)
                   + f"Running {MULTINODE_READ}.\nmemcpy CE GPU(row) -> GPU(column) bandwidth "
                     "(GB/s)\n" + matrix(MULTINODE_READ, rows) + NOTE + "\n", seconds=seconds)


def _find(ident: str) -> str:
    """nvbandwidth.cpp:119-136: a name, or an index into the list."""
    if not ident.isdigit():
        return ident if ident in TESTCASES else f"ERROR: Testcase {ident} not found!"
    index = int(ident)
    return TESTCASES[index] if index < len(TESTCASES) else \
        f"ERROR: Testcase index {ident} out of bound!"


def _accessible(node: SimNode, a: int, b: int) -> bool:
    """cuDeviceCanAccessPeer: NVML's P2P status (0 = OK) where the node has NVLink, else
    PCIe peer access (allowed)."""
    status = node.p2p.get((min(a, b), max(a, b)))
    return status is None or status == 0


def _testcase(node: SimNode, key: str, noise: Callable[..., float]) -> tuple[str, float]:
    gpus = [g.index for g in node.gpus]
    size = 512 * _MIB * _LOOPS * _SAMPLES

    def one(figure: float, *where: object) -> float:
        return figure * noise(key, *where)

    if key in ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "device_local_copy"):
        # testcases_ce.cpp:26, 40, 215: a 1 x N matrix, one copy per GPU.
        figure = bw.hbm if key == "device_local_copy" else bw.host_link
        rows: list[list[float | None]] = [[one(figure(node, g), g) for g in gpus]]
        description = {"host_to_device_memcpy_ce": "memcpy CE CPU(row) -> GPU(column)",
                       "device_to_host_memcpy_ce": "memcpy CE CPU(row) <- GPU(column)",
                       "device_local_copy": "memcpy local GPU(column)"}[key]
    elif key == "device_to_device_memcpy_read_ce":
        # testcases_ce.cpp:88-113: N x N, the diagonal and inaccessible pairs N/A; waived
        # without any accessible pair (testcase.h:127, testcase.cpp:30-50).
        if not any(_accessible(node, a, b) for a in gpus for b in gpus if a != b):
            return "Waived: \n", 0.0
        rows = [[None if a == b or not _accessible(node, a, b) else
                 one(bw.p2p(node, a, b), a, b) for b in gpus] for a in gpus]
        description = "memcpy CE GPU(row) -> GPU(column)"
    else:
        raise NotModelled(f"nvbandwidth testcase {key} is not simulated")
    seconds = sum(size / (v * 1e9) for row in rows for v in row if v)
    return (f"Running {key}.\n{description} bandwidth (GB/s)\n" + matrix(key, rows),
            seconds)
