"""The simulated tools print what the real ones print (agent/sim/tools.py and the stand-in
modules beside it): for each tool and case, the output for a healthy simulated node is held
line by line to a real capture (tests/fixtures/real/: active/, ib/, runs/, and
tests/fixtures/topo/) — same header lines, column layout, units, device order and summary
lines, numbers masked — or, where no capture shows the case, to the tool's own printf
format, quoted here with its source file and line (the sources as extracted under
/tmp/research/src, /tmp/notes/qualify_tools.md)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.read.sources import CommandResult
from clusterdiag.agent.sim import nccl_tests
from clusterdiag.agent.sim.node import build
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.state.hardware import SimNode
from clusterdiag.agent.sim.toolkit import Printed
from clusterdiag.agent.sim.tools import SimTools
from tests.conftest import REPO
from tests.real import FIXTURES, real_file

RUNS = FIXTURES / "real/runs"
NCCL_ARGV = ["-b", "1G", "-e", "8G", "-f", "2", "-g", "8", "-w", "5", "-n", "20"]
NIC_ARGV = ["-d", "mlx5_0", "-i", "1", "--use_cuda=0", "-s", "8388608", "-n", "2000", "-F",
            "--report_gbits", "-p", "18515"]
BURN_ARGV = ["-d", "-tc", "-c", "/opt/gpu-burn/compare.fatbin", "30"]


# -- helpers --------------------------------------------------------------------------


def mask(line: str, widths: bool = False) -> str:
    """Numbers out: with ``widths`` each digit becomes N (columns the tool pads to a width
    keep their width), else each number (its sign, decimals, exponent) becomes one N."""
    if widths:
        return re.sub(r"\d", "N", line)
    return re.sub(r"-?\d+(?:\.\d+)?(?:e[+-]\d+)?", "N", line)


def mask_hex(line: str) -> str:
    """Addresses, GUIDs and bus ids out: 0x… and hex runs with a letter become H."""
    line = re.sub(r"0x[0-9a-fA-F]+", "0xH", line)
    return re.sub(r"\b(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]+\b", "H", line)


_CONVERSION = re.compile(r"%(-?)(0?)(\d*)(?:\.(\d+))?(?:l{0,2})([diuxsgf])")
_BODY = {"d": r"-?\d+", "i": r"-?\d+", "u": r"\d+", "s": r"\S+", "x": r"[0-9a-f]+",
         "g": r"-?[0-9.]+(?:e[-+]\d+)?", "f": r"-?\d+(?:\.\d+)?"}


def c_match(fmt: str, line: str) -> bool:
    """Whether ``line`` is what C's printf(``fmt``, ...) prints: each conversion's value of
    its kind (%d %i %u %x %s %g %f, with l/ll), padded to its width on the side the
    format says (or wider, never padded, when the value overflows it), the text between
    as it is."""
    fields = list(_CONVERSION.finditer(fmt))
    pattern, i = "", 0
    for m in fields:
        pattern += re.escape(fmt[i:m.start()])
        pattern += r"(\S+ *)" if m[1] else r"( *\S+)"
        i = m.end()
    found = re.fullmatch(pattern + re.escape(fmt[i:]), line)
    if found is None:
        return False
    for m, text in zip(fields, found.groups(), strict=True):
        left, zero, width, places, kind = m.groups()
        value = text.strip(" ")
        body = _BODY[kind] if not places else rf"-?\d+\.\d{{{places}}}"
        if not re.fullmatch(body, value):
            return False
        if width:
            n = int(width)
            padded = text.endswith(" ") if left else text.startswith(" ")
            if len(text) < n or (len(text) > n and padded):
                return False
            if zero and len(value) < n:
                return False
    return True


def run_file(name: str) -> tuple[str, list[str], int]:
    """A research run (tests/fixtures/real/runs/*.txt): the command, the lines it printed
    (stdout and stderr as the terminal interleaved them), its exit status."""
    lines = [line for line in (RUNS / name).read_text().splitlines()
             if not line.startswith("++++ echo")]
    command = lines[0].lstrip("$+ ").strip()
    status = lines[-1]
    code = int(re.sub(r"\D", "", status))
    return command, lines[1:-1], code


def node(profile: str = "dgx-h100", name: str = "s1") -> SimNode:
    return build(NodeSpec(name, profile))


def tools_for(*nodes: SimNode) -> SimTools:
    return SimTools({n.name: n for n in nodes})


def sim(program: str, argv: list[str], target: SimNode | None = None,
        env: Mapping[str, str] | None = None, timeout_s: float = 10.0) -> CommandResult:
    target = target or node()
    return tools_for(target)(target.name, [program, *argv], env or {}, timeout_s)


def block(lines: list[str], start: str, stop: str | None = None) -> list[str]:
    """The lines from the first that starts with ``start`` up to (not with) ``stop``."""
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    if stop is None:
        return lines[first:]
    end = next(i for i in range(first + 1, len(lines)) if lines[i].startswith(stop))
    return lines[first:end]


# -- nccl-tests -------------------------------------------------------------------------


@pytest.mark.parametrize(("run", "iters"), [("nccl_all_reduce_plan.txt", "20"),
                                            ("nccl_all_reduce_plan_full.txt", "100")])
def test_nccl_header_is_the_real_v2_19_6_header(run: str, iters: str) -> None:
    """The real v2.19.6 binary with qualify's arguments (research run): the version line
    (NCCL's version code aside), the test line, ``# nThread`` with the argv's -w and -n and
    ``unalign: 0``, ``#``, ``# Using devices`` — identical."""
    command, real, _ = run_file(run)
    argv = command.split()[1:]
    assert argv[argv.index("-n") + 1] == iters
    ours = sim("all_reduce_perf", argv).stdout.splitlines()
    code = re.compile(r"nccl-headers=\d+ nccl-library=\d+")  # the NCCL build's, not ours
    assert code.sub("NCCL", ours[0]) == code.sub("NCCL", real[0])
    assert ours[1:5] == real[1:5]


def test_nccl_device_lines_follow_util_cu_687_in_cuda_ordinal_order() -> None:
    """util.cu:687 ``#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s``,
    one per GPU in CUDA ordinal order (util.cu:676): the layout's GPUs by index."""
    target = node()
    lines = sim("all_reduce_perf", NCCL_ARGV, target).stdout.splitlines()
    devices = [line for line in lines if line.startswith("#  Rank")]
    fmt = "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] "
    assert len(devices) == len(target.gpus)
    for i, (line, gpu) in enumerate(zip(devices, target.gpus, strict=True)):
        head, name = line[:len(line) - len(gpu.name) - 1], line[-len(gpu.name):]
        assert c_match(fmt, head + " "), line
        assert name == gpu.name
        assert f"device {i:2d} [{gpu.bdf[:7]}:{gpu.bdf[8:10]}]" in line


def test_nccl_table_is_util_cu_742_to_780() -> None:
    """The result header as util.cu:742-759 formats it (the format strings quoted), each
    row ``%12li  %12li  %8s  %6s  %6s`` (util.cu:457) and twice ``  %7s  %6s  %6s  %6g``
    (util.cu:508), the footer of util.cu:777-780 and 856, then the blank of 838-843."""
    lines = sim("all_reduce_perf", NCCL_ARGV).stdout.split("\n")
    start = lines.index("# Using devices") + 9
    # The format strings of util.cu:753-759 as they are, through printf's rules.
    top = "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place" \
          "          "
    columns = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s"
    assert lines[start] == "#"
    assert lines[start + 1] == top % ("", "", "", "", "")
    assert lines[start + 2] == columns % (
        "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
        "algbw", "busbw", "#wrong", 0, "")
    assert lines[start + 3] == columns % (
        "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
        "(GB/s)", "", 0, "")
    row = "%12li  %12li  %8s  %6s  %6s" + "  %7s  %6s  %6s  %6g" * 2
    rows = lines[start + 4:start + 8]
    assert [r.split()[0] for r in rows] == [str(1 << 30 << k) for k in range(4)]
    assert all(c_match(row, r) for r in rows), rows
    assert lines[start + 8] == "# Out of bounds values : 0 OK"
    assert c_match("# Avg bus bandwidth    : %g ", lines[start + 9])
    assert lines[start + 10:] == ["#", "# Collective test concluded: all_reduce_perf", "#", "",
                                  ""][:len(lines) - start - 10]


def test_nccl_rows_have_the_columns_of_a_real_table() -> None:
    """Each row has the 13 fields of a real table (capture 01, the same all_reduce), in
    the same kinds: size, count, type, redop, root, then time algbw busbw #wrong twice."""
    real = real_file("real/active", "active",
                     "01_nccl_allreduce_1node_8xA100-80GB_v2.13-layout_gcm-fixture.txt")
    real_rows = [line for line in real.read_text().splitlines()
                 if re.match(r"^\s+\d+\s+\d+\s+float", line)]
    ours = [line for line in sim("all_reduce_perf", NCCL_ARGV).stdout.splitlines()
            if re.match(r"^\s+\d+\s+\d+\s+float", line)]
    assert real_rows
    assert ours
    assert {mask(" ".join(r.split())) for r in real_rows} == {
        mask(" ".join(r.split())) for r in ours}


def test_nccl_between_nodes_an_mpi_build_prints_one_table_like_capture_02() -> None:
    """Capture 02 (2 nodes x 8 GPUs, MPI): one header, every rank's device line in rank
    order, the first node's ranks then the second's, one table (util.cu:697-707)."""
    real = real_file("real/active", "active",
                     "02_nccl_allreduce_2node_16xA100-80GB_pairwise_gcm-fixture.txt")
    real_ranks = [line for line in real.read_text().splitlines() if line.startswith("#  Rank")]
    a, b = node("dgx-a100", "n1"), node("dgx-a100", "n2")
    result = tools_for(a, b).group(["n1", "n2"], ["all_reduce_perf", *NCCL_ARGV], {}, 10)
    lines = result.stdout.splitlines()
    ranks = [line for line in lines if line.startswith("#  Rank")]
    assert len(ranks) == len(real_ranks) == 16
    assert [int(r.split()[2]) for r in ranks] == list(range(16))
    assert [r.split()[8] for r in ranks] == ["n1"] * 8 + ["n2"] * 8
    assert [int(r.split()[10]) for r in ranks] == [*range(8), *range(8)]
    for kind in ("# nThread", "# Out of bounds", "# Avg bus bandwidth",
                 "# Collective test concluded"):
        assert sum(line.startswith(kind) for line in lines) == 1, kind


def test_nccl_between_nodes_without_mpi_prints_one_run_per_node() -> None:
    """Without MPI=1 (src/Makefile:9) every task is a job of its own (common.cu:1480):
    each node prints a full single-node output, ranks 0-7 on its own host."""
    a, b = node("dgx-h100", "n1"), node("dgx-h100", "n2")
    for n in (a, b):
        n.nccl_tests_mpi = False
    result = tools_for(a, b).group(["n1", "n2"], ["all_reduce_perf", *NCCL_ARGV], {}, 10)
    lines = result.stdout.splitlines()
    assert sum(line.startswith("# Collective test starting") for line in lines) == 2
    assert sum(line.startswith("# Collective test concluded") for line in lines) == 2
    ranks = [line.split() for line in lines if line.startswith("#  Rank")]
    assert [int(r[2]) for r in ranks] == [*range(8), *range(8)]
    assert [r[8] for r in ranks] == ["n1"] * 8 + ["n2"] * 8


def test_nccl_bad_option_is_the_real_usage_with_exit_0() -> None:
    """The real binary on ``-Z 3``: getopt's complaint, ``invalid option '?'``, the usage
    (common.cu:1358-1405), exit 0 (research run)."""
    command, real, code = run_file("nccl_bad_option.txt")
    path = command.split()[0]
    result = nccl_tests.parse(command.split())
    assert isinstance(result, Printed)
    assert result.code == code == 0
    assert (result.stderr + result.stdout).splitlines() == real
    assert path in result.stderr


def test_nccl_help_is_the_real_usage() -> None:
    _, real, code = run_file("nccl_help.txt")
    result = sim("all_reduce_perf", ["-h"])
    assert result.returncode == code
    assert result.stdout.splitlines() == real


def test_nccl_sizes_the_wrong_way_round_is_the_real_refusal() -> None:
    command, real, code = run_file("nccl_bad_sizes.txt")
    result = sim("all_reduce_perf", command.split()[1:])
    assert (result.returncode, result.stdout, result.stderr.splitlines()) == (code, "", real)


def test_nccl_without_libnccl_is_the_loaders_refusal() -> None:
    """ld.so's line and exit 127 (research run without LD_LIBRARY_PATH)."""
    command, real, code = run_file("nccl_all_reduce_noldpath.txt")
    target = node()
    target.missing_libraries.add("libnccl.so.2")
    argv = command.split()
    result = nccl_tests.single(target, argv, {}, lambda size, half: 1.0, None)
    assert (result.code, result.stdout, result.stderr.splitlines()) == (code, "", real)


def test_nccl_without_the_driver_library_is_the_real_cuda_failure() -> None:
    """No libcuda.so.1: cudaGetDeviceCount fails at util.cu:674 after ``# Using devices``,
    then main's TESTCHECK (common.cu:1454), exit 2 (research run, host name and pid
    masked)."""
    command, real, code = run_file("nccl_all_reduce_plan.txt")
    target = node()
    target.missing_libraries.add("libcuda.so.1")
    result = sim("all_reduce_perf", command.split()[1:], target)
    ours = result.stdout.splitlines()
    assert result.returncode == code == 2
    assert ours[1:5] == real[1:5]  # after the version line (NCCL's version code)
    pid = re.compile(r"pid \d+:")
    assert [pid.sub("pid N:", line) for line in ours[5:]] == [
        pid.sub("pid N:", line.replace("vm", "s1")) for line in real[5:]]


# -- nvbandwidth --------------------------------------------------------------------------


NVB_CASES = ["host_to_device_memcpy_ce", "device_to_host_memcpy_ce",
             "device_to_device_memcpy_read_ce", "device_local_copy"]


def test_nvbandwidth_header_like_capture_09_and_output_cpp() -> None:
    """The version, CUDA and driver lines as capture 09 (v0.6) prints them, then the host
    name (output.cpp:160, v0.8) and ``Device N: name (dddddddd:bb:dd)`` lower-case
    (output.cpp:90-93) per CUDA ordinal."""
    real = real_file("real/active", "active", "09_nvbandwidth_v0.6_GH200_superbench-fixture.txt")
    real_lines = [line for line in real.read_text().splitlines() if not line.startswith("#")]
    target = node()
    ours = sim("nvbandwidth", ["-t", *NVB_CASES], target).stdout.splitlines()
    assert [mask(line) for line in ours[:7]] == [mask(line) for line in real_lines[:7]]
    assert ours[7] == target.name
    device = re.compile(r"^Device (\d+): (.+) \(([0-9a-f]{8}):([0-9a-f]{2}):([0-9a-f]{2})\)$")
    assert device.match(real_lines[7])
    for gpu, line in zip(target.gpus, ours[8:16], strict=True):
        m = device.match(line)
        assert m, line
        assert (int(m[1]), m[2], f"{int(m[3], 16):04x}:{m[4]}") == (
            gpu.index, gpu.name, gpu.bdf[:7])
    assert ours[16] == ""


def _nvb_blocks(lines: list[str]) -> dict[str, list[str]]:
    """Each ``Running X.`` block up to its SUM line's blank."""
    out = {}
    for i, line in enumerate(lines):
        if line.startswith("Running "):
            end = next(j for j in range(i, len(lines)) if lines[j].startswith("SUM "))
            out[line[len("Running "):-1]] = lines[i:end + 2]
    return out


def _cells(line: str) -> list[str]:
    """A matrix line as its 2-wide label and 10-wide cells (inline_common.h:64-101)."""
    return [line[:2]] + [line[i:i + 10] for i in range(2, len(line), 10)]


def test_nvbandwidth_matrices_like_capture_09() -> None:
    """Each testcase as capture 09 prints it: ``Running X.``, the description, the column
    line, rows, a blank, ``SUM X N.NN``, a blank; 2-wide labels and 10-wide cells with two
    decimals; N/A on the diagonal of the GPU-to-GPU matrix (inline_common.h:93-95)."""
    real = real_file("real/active", "active", "09_nvbandwidth_v0.6_GH200_superbench-fixture.txt")
    theirs = _nvb_blocks(real.read_text().splitlines())
    ours = _nvb_blocks(sim("nvbandwidth", ["-t", *NVB_CASES]).stdout.splitlines())
    for case in ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce"):
        real_block, our_block = theirs[case], ours[case]
        assert our_block[:2] == real_block[:2]
        for block_ in (real_block, our_block):  # inline_common.h:69-101
            columns = len(block_[2]) // 10
            assert c_match("  " + "%10d" * columns, block_[2]), block_[2]
            assert all(c_match("%2d" + "%10.2f" * columns, line) for line in block_[3:-3])
            assert block_[-3] == ""
            assert block_[-1] == ""
        assert [mask(line) for line in our_block[-3:]] == [mask(line) for line in real_block[-3:]]
    d2d = ours["device_to_device_memcpy_read_ce"]
    assert d2d[1] == "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)"  # testcases_ce.cpp:112
    for row, line in enumerate(d2d[3:11]):
        assert _cells(line)[row + 1] == f"{'N/A':>10}"
    local = ours["device_local_copy"]
    assert local[1] == "memcpy local GPU(column) bandwidth (GB/s)"  # testcases_ce.cpp:225
    assert len(local) == len(ours["host_to_device_memcpy_ce"])


def test_nvbandwidth_local_copy_prints_a_copy_rate() -> None:
    """device_local_copy counts each copied byte once (memcpy.cpp:483): about half the
    read+write HBM figure (NVIDIA/nvbandwidth#48), ~1.45 TB/s per H100 against the 2.90
    TB/s BabelStream Copy of sim/bandwidth.py's sources."""
    local = _nvb_blocks(sim("nvbandwidth", ["-t", "device_local_copy"]).stdout.splitlines())
    values = [float(v) for v in local["device_local_copy"][3].split()[1:]]
    assert all(abs(v - 2900 / 2) < 2900 / 2 * 0.05 for v in values), values


def test_nvbandwidth_unknown_testcase_is_an_error_line_and_the_run_goes_on() -> None:
    """nvbandwidth.cpp:129 and 154, output.cpp:179: ``ERROR: Testcase X not found!``."""
    result = sim("nvbandwidth", ["-t", "no_such_case", "device_local_copy"])
    lines = result.stdout.splitlines()
    assert result.returncode == 0
    assert "ERROR: Testcase no_such_case not found!" in lines
    assert "Running device_local_copy." in lines


def test_nvbandwidth_bad_option_is_the_real_refusal() -> None:
    """The real v0.8 binary on ``--bogus`` (research run): the version lines, ``ERROR:
    Invalid Arguments``, the argv, the options, exit 1 (nvbandwidth.cpp:227-245)."""
    command, real, code = run_file("nvb_fakedrv_badarg.txt")
    path = command.split()[0]
    result = sim("nvbandwidth", ["--bogus"])
    ours = result.stdout.replace("nvbandwidth --bogus", f"{path} --bogus").splitlines()
    assert result.returncode == code
    # the research build had no git checkout: its Git version line is empty
    assert ours[1] == "Built from Git version: v0.8"
    assert real[1] == "Built from Git version: "
    assert ours[:1] + ours[2:] == real[:1] + real[2:]


def test_nvbandwidth_help_is_the_real_help() -> None:
    _, real, code = run_file("nvb_fakedrv_help.txt")
    result = sim("nvbandwidth", ["--help"])
    ours = result.stdout.splitlines()
    assert result.returncode == code
    assert ours[:1] + ours[2:] == real[:1] + real[2:]


def test_nvbandwidth_ends_with_the_note_of_output_cpp_44() -> None:
    lines = sim("nvbandwidth", ["-t", "device_local_copy"]).stdout.split("\n")
    assert lines[-4:] == [
        "NOTE: The reported results may not reflect the full capabilities of the platform.",
        "Performance can vary with software drivers, hardware clocks, and system topology.",
        "", ""]


# -- gpu_burn ---------------------------------------------------------------------------


@pytest.mark.parametrize("run", ["gpuburn_fakedrv_h.txt"])
def test_gpu_burn_help_is_the_real_help(run: str) -> None:
    command, real, code = run_file(run)
    result = sim("gpu_burn", command.split()[1:])
    assert (result.returncode, result.stdout.splitlines()) == (code, real)


def test_gpu_burn_compare_path_with_h_is_the_help() -> None:
    """``-h`` is a substring test on every argument (gpu_burn-drv.cpp:826): a -c path with
    ``-h`` in it prints the help, exit 0 (research run gpuburn_fakedrv_c_path_with_h)."""
    _, real, code = run_file("gpuburn_fakedrv_h.txt")
    result = sim("gpu_burn", ["-d", "-tc", "-c", "/home/my-home/compare.fatbin", "5"])
    assert (result.returncode, result.stdout.splitlines()) == (code, real)


@pytest.mark.parametrize("run", ["gpuburn_fakedrv_c_path_with_d.txt",
                                 "gpuburn_fakedrv_time_first.txt", "gpuburn_fakedrv_plan.txt"])
def test_gpu_burn_reads_its_arguments_as_the_real_one(run: str) -> None:
    """TIME is argv[1 + thisParam] and ``-d`` a substring test (gpu_burn-drv.cpp:848-914):
    the research runs' ``Using compare file`` and ``Burning for`` lines, word for word."""
    command, real, _ = run_file(run)
    argv = command.split()[1:]
    ours = sim("gpu_burn", argv).stdout.splitlines()
    wanted = [line for line in real if "compare file" in line or line.startswith("Burning")]
    got = [line for line in ours if "compare file" in line or line.startswith("Burning")]
    assert got[:2] == wanted[:2]


def test_gpu_burn_takes_the_run_length_after_the_options_it_counted() -> None:
    """``runLength = atoi(argv[1 + thisParam])`` (gpu_burn-drv.cpp:912): with ``-tc 12 -d
    3`` two options were counted, so TIME is argv[3], ``-d``: atoi gives 0."""
    lines = sim("gpu_burn", ["-tc", "12", "-d", "3"]).stdout.splitlines()
    assert "Burning for 0 seconds." in lines


def test_gpu_burn_healthy_run_like_capture_06() -> None:
    """The lines of a real run (capture 06, 8 GPUs, doubles and tensor cores): nvidia-smi
    -L's, ``\\r``-separated progress with Gflop/s, errors and temperatures, ``Summary at:``
    blocks, each child's ``Initialized``/``Results``/``Freed``/``Uninitted`` lines, ``done``
    and the verdict; and the lines capture 06's older build lacks, as the source prints
    them (:612 the SIGTERM line, :913-914 the compare file and run length)."""
    real = real_file("real/active", "active",
                     "06_gpu_burn_8xA100-80GB_doubles_tensorcores_superbench.txt")
    real_text = "\n".join(line for line in real.read_text().split("\n")
                          if not line.startswith("# "))
    result = sim("gpu_burn", BURN_ARGV, node("dgx-a100"))
    assert result.returncode == 0

    def kinds(text: str) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for piece in re.split(r"[\r\n]", text):
            shape = mask(re.sub(r"GPU-[0-9a-f-]{36}", "GPU-UUID", piece))
            shape = re.sub(r"Summary at:   .*", "Summary at:   DATE", shape)
            shape = re.sub(r"NVIDIA \S+", "NVIDIA MODEL", shape)
            found.setdefault(shape.split(" ")[0] if shape else "", set()).add(shape)
        return found

    theirs, ours = kinds(real_text), kinds(result.stdout)
    for word in ("GPU", "N%", "\tSummary", "Initialized", "Results", "Freed", "Uninitted",
                 "done", "Tested", "\tGPU", ""):
        assert ours[word] == theirs[word], word
    assert set(ours) == set(theirs) | {"Using", "Burning"}
    lines = result.stdout.split("\n")
    assert "Killing processes with SIGTERM (soft kill)" in lines
    assert lines.count("Using compare file: /opt/gpu-burn/compare.fatbin") == 1 + 8
    assert re.search(r"\(\d+ Gflop/s\)", result.stdout)


def test_gpu_burn_without_its_compare_file_dies_as_the_source_says() -> None:
    """``compare.fatbin`` is looked up in the working directory (gpu_burn-drv.cpp:33, 821):
    every child fails in initCompareKernel (:238-244) and exits 124 (:343-346), the parent
    sees every pipe close (:508-511) and exits 123 (:603-606); the pre-fork lines come out
    once per child and once from the parent, as the research run shows them twice."""
    result = sim("gpu_burn", ["-d", "-tc", "30"])
    assert result.returncode == 123
    assert result.stderr.endswith("\n\nNo clients are alive!  Aborting\n")
    fails = [line for line in result.stderr.splitlines() if "Couldn't init a GPU test" in line]
    assert len(fails) == 8
    assert all(line.endswith("Couldn't init a GPU test: Error in couldn't find compare kernel: "
                             "compare.fatbin (gpu_burn-drv.cpp:241): named symbol not found")
               for line in fails)
    assert result.stdout.count("Using compare file: compare.fatbin\nBurning for 30 seconds.\n") \
        == 8 + 1
    assert "(DIED!)" in result.stdout


def test_gpu_burn_is_found_where_a_caller_looks() -> None:
    """``which`` and ``readlink -f`` answer, and the compare file beside the binary works."""
    target = node()
    tools = tools_for(target)
    found = tools(target.name, ["which", "gpu_burn"], {}, 5)
    real = tools(target.name, ["readlink", "-f", found.stdout.strip()], {}, 5)
    assert (found.returncode, found.stdout) == (0, "/usr/local/bin/gpu_burn\n")
    assert (real.returncode, real.stdout) == (0, "/opt/gpu-burn/gpu_burn\n")
    beside = real.stdout.strip().rsplit("/", 1)[0] + "/compare.fatbin"
    burn = tools(target.name, [real.stdout.strip(), "-d", "-tc", "-c", beside, "10"], {}, 5)
    assert burn.returncode == 0
    assert burn.stdout.endswith("\tGPU 7: OK\n")


# -- perftest ib_write_bw -----------------------------------------------------------------


def _streams(name: str) -> tuple[str, str]:
    return (RUNS / f"{name}.stdout").read_text(), (RUNS / f"{name}.stderr").read_text()


def test_perftest_without_cuda_refuses_use_cuda_like_debians() -> None:
    """Debian's 4.5 build has no ``--use_cuda`` (perftest_parameters.c:2289-2291): the real
    refusal, both streams word for word, exit 1."""
    stdout, stderr = _streams("ib_write_bw_use_cuda_client")
    target = node()
    target.perftest_cuda = False
    result = sim("ib_write_bw", [*NIC_ARGV, "localhost"], target)
    assert (result.returncode, result.stdout, result.stderr) == (1, stdout, stderr)


def test_perftest_help_lists_use_cuda_only_in_a_cuda_build() -> None:
    """The real help of the build without CUDA word for word; a CUDA build adds its two
    lines after --tclass (perftest_parameters.c:536-541). ``--help`` exits 1."""
    stdout, _ = _streams("ib_write_bw_help")
    plain = node()
    plain.perftest_cuda = False
    without = sim("ib_write_bw", ["--help"], plain)
    with_cuda = sim("ib_write_bw", ["--help"])
    assert (without.returncode, without.stdout) == (1, stdout)
    extra = [line for line in with_cuda.stdout.splitlines() if line not in stdout.splitlines()]
    assert [line.split()[0] for line in extra] == ["--use_cuda=<cuda", "--use_cuda_bus_id=<cuda"]
    assert "--use_cuda" not in stdout


def test_perftest_version_is_the_real_one() -> None:
    _, real, code = run_file("ib_write_bw_V.txt")
    result = sim("ib_write_bw", ["-V"])
    assert (result.returncode, result.stdout.splitlines()) == (code, real)


def test_perftest_with_no_rdma_device_is_the_real_refusal() -> None:
    stdout, stderr = _streams("ib_write_bw_no_device_server")
    result = sim("ib_write_bw", [a for a in NIC_ARGV if a != "--use_cuda=0"],
                 node("hgx-h100-pcie"))
    assert (result.returncode, result.stdout, result.stderr) == (1, stdout, stderr)


def _loopback(argv: list[str], target: SimNode | None = None, wait_s: float = 0.3,
              retry_after_s: float | None = None) -> tuple[CommandResult, CommandResult]:
    """The server, then the client ``wait_s`` later (again ``retry_after_s`` after a
    refusal), as a caller runs a same-host loopback."""
    target = target or node()
    tools = tools_for(target)
    server: list[CommandResult] = []
    thread = threading.Thread(target=lambda: server.append(
        tools(target.name, ["ib_write_bw", *argv], {}, 10)))
    thread.start()
    time.sleep(wait_s)
    client = tools(target.name, ["ib_write_bw", *argv, "localhost"], {}, 10)
    if client.returncode == 1 and retry_after_s is not None:
        time.sleep(retry_after_s)
        client = tools(target.name, ["ib_write_bw", *argv, "localhost"], {}, 10)
    thread.join(15)
    return server[0], client


def _perftest_blocks(text: str) -> list[list[str]]:
    """Each side's block: its banner's title to its result line."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == "RDMA_Write BW Test"]
    ends = [i + 1 for i, line in enumerate(lines) if line.startswith(" #bytes")]
    return [lines[s:e + 1] for s, e in zip(starts, ends, strict=True)]


def _shape(line: str) -> str:
    return mask(mask_hex(line))


def test_perftest_loopback_like_capture_07() -> None:
    """Capture 07 (a real loopback, 8 MiB, host memory, MB/sec): the client's and the
    server's banner, addresses, result header and line, in the same order and layout
    (only the server's block lacks ``TX depth``, perftest_parameters.c:3219). The capture's
    older perftest has no ``ibv_wr* API`` line, which 4.5-0.17 prints (:3218)."""
    real = real_file("real/active", "active",
                     "07_ib_write_bw_loopback_8MiB_hostmem_HDR_superbench.txt").read_text()
    argv = ["-d", "mlx5_0", "-s", "8388608", "-n", "20000", "-F"]
    server, client = _loopback(argv)
    assert (server.returncode, client.returncode) == (0, 0), (server.stderr, client.stderr)
    real_client, real_server = _perftest_blocks(real)[:2]
    ours_client = _perftest_blocks(client.stdout)[0]
    ours_server = _perftest_blocks(server.stdout)[0]

    def comparable(lines: list[str]) -> list[str]:
        keep = [re.sub(r"Device         : \S+", "Device         : DEV", line.strip()
                       if "BW Test" in line else line)
                for line in lines if not line.startswith(" ibv_wr* API")]
        return [_shape(line) for line in keep]

    assert comparable(ours_client) == comparable(real_client)
    assert comparable(ours_server) == comparable(real_server)
    report = " %-7lu    %-10lu       %-7.2f            %-7.2f\t\t   %-7.6f"  # REPORT_FMT
    assert c_match(report, real_client[-1])
    assert c_match(report, ours_client[-1])
    assert "\n************************************\n* Waiting for client to connect... *\n" \
           "************************************\n" in server.stdout


def test_perftest_report_gbits_prints_gb_per_s() -> None:
    """``--report_gbits``: RESULT_FMT_G (perftest_parameters.h:204), Gb/sec (10^9 bits),
    a rail's NDR line rate here."""
    _, client = _loopback(NIC_ARGV)
    header = next(line for line in client.stdout.splitlines() if line.startswith(" #bytes"))
    assert header == (" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   "
                      "MsgRate[Mpps]")
    row = client.stdout.splitlines()[client.stdout.splitlines().index(header) + 1]
    assert c_match(" %-7lu    %-10lu       %-7.2f            %-7.2f\t\t   %-7.6f", row)
    assert 350 < float(row.split()[3]) < 400


def test_perftest_client_before_its_server_listens_is_refused() -> None:
    """A client with no server listening: perftest_communication.c:698 then :1370 (no
    newline in 4.5-0.17) and write_bw.c:121, exit 1."""
    result = sim("ib_write_bw", [*NIC_ARGV, "localhost"])
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == ("Couldn't connect to localhost:18515\nUnable to open file "
                             "descriptor for socket connection Unable to init the socket "
                             "connection\n")


def test_perftest_slow_server_start_is_met_by_a_retry() -> None:
    """A server that opens its device slowly (fault perftest_slow_start): a client 0.2 s
    after it is refused, the same client again once it listens gets its figure."""
    target = node()
    target.perftest_open_s = 0.8
    server, client = _loopback(NIC_ARGV, target, wait_s=0.2, retry_after_s=1.0)
    assert (server.returncode, client.returncode) == (0, 0)
    early = _loopback(NIC_ARGV, target, wait_s=0.2)[1]
    assert early.returncode == 1
    assert early.stderr.startswith("Couldn't connect to localhost:18515\n")


def test_perftest_gpu_far_from_its_nic_is_slower() -> None:
    """GPUDirect RDMA with the buffer on a GPU across the socket link runs at about half
    the rate (linux-rdma/perftest#241, 'SYS'): mlx5_10 sits beside GPU 6, not GPU 1."""
    near = _loopback(["-d", "mlx5_10", "--use_cuda=6", "-s", "8388608", "-n", "2000", "-F",
                      "--report_gbits", "-p", "18520"])[1]
    far = _loopback(["-d", "mlx5_10", "--use_cuda=1", "-s", "8388608", "-n", "2000", "-F",
                     "--report_gbits", "-p", "18521"])[1]

    def rate(result: CommandResult) -> float:
        return float(_perftest_blocks(result.stdout)[0][-1].split()[3])

    assert rate(far) < 0.55 * rate(near)


# -- ibstat -----------------------------------------------------------------------------


def _cas(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith("CA '"):
            name = line[4:-1]
        out.setdefault(name, []).append(line)
    return out


def test_ibstat_lists_the_cas_in_strcmp_order_like_the_real_capture() -> None:
    """The real H100 node of capture ibstat_gpud_some_down_0 has the simulated DGX H100's
    twelve CA names: the same order (strcmp, rdma-core umad.c:555-558 @ v44.0), the same
    lines per CA and port with numbers masked, the same link layer per CA."""
    real = real_file("real/ib", "ib", "ibstat_gpud_some_down_0.txt").read_text()
    result = sim("ibstat", [])
    theirs, ours = _cas(real), _cas(result.stdout)
    assert list(ours) == list(theirs)
    assert list(ours)[:5] == ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_11", "mlx5_2"]
    for name in theirs:
        def keys(lines: list[str]) -> list[str]:
            return [line.split(":")[0] for line in lines]
        assert keys(ours[name]) == keys(theirs[name]), name
        layer = [line for line in theirs[name] if "Link layer" in line]
        assert [line for line in ours[name] if "Link layer" in line] == layer, name
        for line in ours[name]:
            field = line.split(":")[0].strip()
            if field in ("State", "Physical state") and "Active" in " ".join(theirs[name]):
                continue
            real_line = next(t for t in theirs[name] if t.split(":")[0] == line.split(":")[0])
            if field not in ("State", "Physical state", "CA type", "Firmware version"):
                assert _shape(line) == _shape(real_line), (name, line, real_line)


def test_ibstat_ethernet_ports_like_the_real_capture() -> None:
    """RoCE ports: base and SM lid 0, capability mask 0x00010000, the port GUID the MAC's
    EUI-64 (capture ibstat_gpud_h100_8x400G_plus_eth_all_active: 0xa088c20300e3142a ->
    0xa288c2fffee3142a)."""
    real = real_file("real/ib", "ib", "ibstat_gpud_h100_8x400G_plus_eth_all_active.txt")
    theirs = _cas(real.read_text())["mlx5_0"]
    ours = _cas(sim("ibstat", []).stdout)["mlx5_1"]
    for field in ("Base lid", "SM lid", "Capability mask", "Link layer"):
        assert [line for line in ours if field in line] == [
            line for line in theirs if field in line], field
    node_guid = int(next(line for line in ours if "Node GUID" in line).split()[-1], 16)
    port_guid = int(next(line for line in ours if "Port GUID" in line).split()[-1], 16)
    assert port_guid == (node_guid ^ (0x02 << 56)) & ~(0xFFFF << 24) | (0xFFFE << 24)


def test_ibstat_with_no_rdma_device_prints_nothing() -> None:
    result = sim("ibstat", [], node("hgx-h100-pcie"))
    assert (result.returncode, result.stdout, result.stderr) == (
        0, (RUNS / "ibstat.stdout").read_text(), (RUNS / "ibstat.stderr").read_text())


def test_ibstat_of_an_unknown_ca_is_the_real_panic() -> None:
    _, real, code = run_file("ibstat_mlx5_0_nodev.txt")
    result = sim("ibstat", ["mlx5_0"], node("hgx-h100-pcie"))
    assert result.returncode == code == 255
    assert [mask(line) for line in result.stderr.splitlines()] == [mask(line) for line in real]


def test_ibstat_version_is_the_real_one() -> None:
    _, real, code = run_file("ibstat_V.txt")
    result = sim("ibstat", ["-V"])
    assert (result.returncode, result.stdout.splitlines()) == (code, real)


# -- nvidia-smi -----------------------------------------------------------------------------


TOPO = REPO / "tests/fixtures/topo"


def test_topo_layout_like_the_real_driver_590_capture() -> None:
    """``nvidia-smi topo -m`` as the real single-GPU H100 capture (driver 590) lays it out:
    a tab before the labels, ``CPU Affinity``, ``NUMA Affinity``, ``GPU NUMA ID``; GPU
    rows `` X `` on the diagonal, the CPU list, the NUMA node, an empty cell, N/A; the
    legend word for word."""
    real = (TOPO / "single-gpu__linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt").read_text()
    real_lines = [re.sub(r"\x1b\[\d+m", "", line) for line in real.splitlines()]
    ours = sim("nvidia-smi", ["topo", "-m"]).stdout.splitlines()
    assert ours[0].startswith("\tGPU0\tGPU1")
    assert ours[0].endswith(real_lines[0][len("\tGPU0"):])
    gpu_row = ours[1].split("\t")
    assert (gpu_row[1], gpu_row[-2:]) == (" X ", ["", "N/A"])
    real_row = real_lines[1].split("\t")
    assert (real_row[1], real_row[-2:]) == (" X ", ["", "N/A"])
    legend = real_lines[real_lines.index("Legend:"):]
    assert ours[ours.index("Legend:"):ours.index("Legend:") + len(legend)] == legend


def test_topo_pairs_each_gpu_with_its_nic_and_lists_nics_like_the_real_captures() -> None:
    """NIC rows and the NIC legend as the real 3-NIC capture prints them (``  NICn:
    mlx5_n`` in name order); each DGX H100 GPU is PIX to its own rail (layout.py) and SYS
    across the socket link."""
    real = (TOPO / "a100_sxm4_8gpu_3nic_4numa_fastdeploy.txt").read_text().splitlines()
    ours = sim("nvidia-smi", ["topo", "-m"]).stdout.splitlines()
    legend = ours[ours.index("NIC Legend:"):]
    real_legend = real[real.index("NIC Legend:"):]
    assert legend[:2 + len(real_legend) - 2] == real_legend
    header = ours[0].split("\t")
    names = {f"NIC{i}": line.split(": ")[1] for i, line in enumerate(legend[2:])}
    rows = {line.split("\t")[0]: dict(zip(header[1:], line.split("\t")[1:], strict=False))
            for line in ours[1:] if line.startswith(("GPU", "NIC"))}
    pix = {gpu: [names[c] for c, v in cells.items() if v == "PIX" and c.startswith("NIC")]
           for gpu, cells in rows.items() if gpu.startswith("GPU")}
    assert pix == {"GPU0": ["mlx5_0"], "GPU1": ["mlx5_3"], "GPU2": ["mlx5_4"],
                   "GPU3": ["mlx5_5"], "GPU4": ["mlx5_6"], "GPU5": ["mlx5_9"],
                   "GPU6": ["mlx5_10"], "GPU7": ["mlx5_11"]}
    assert rows["GPU1"][next(n for n, v in names.items() if v == "mlx5_10")] == "SYS"


def test_query_gpu_is_csv_without_a_header() -> None:
    result = sim("nvidia-smi", ["--query-gpu=index,pci.bus_id", "--format=csv,noheader"])
    assert result.stdout.splitlines()[:2] == ["0, 00000000:1B:00.0", "1, 00000000:43:00.0"]


# -- dcgmi --------------------------------------------------------------------------------


# nvvs/include/NvvsJsonStrings.h:20-53 @ DCGM 4.6.0, the names dcgmi's JSON may carry.
DCGM_KEYS = {"test_categories", "category", "tests", "name", "results", "status", "warnings",
             "warning", "info", "version", "runtime_error", "error_code", "gpu_ids", "gpu_id",
             "DCGM Diagnostic", "Warning", "error_id", "error_category", "error_severity",
             "iterations", "Overall Result", "GPU Device IDs", "GPU Device Serials",
             "Driver Version Detected", "aux_data", "entities", "entity_groups",
             "entity_group", "entity_group_id", "entity_id", "serial_num", "device_id",
             "test_summary", "metadata"}


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def test_dcgmi_json_has_dcgm_4_names_and_jsoncpp_layout() -> None:
    """Only NvvsJsonStrings.h's names; the categories of the plugins (PluginStrings.h:
    41-60); jsoncpp 1.9.6's styled writer (DCGM's toStyledString, Diag.cpp:1303): tab
    indentation, ``"name" : value``, members sorted, each array on lines of its own."""
    result = sim("dcgmi", ["diag", "-r", "3", "-j"])
    document = json.loads(result.stdout)
    assert _keys(document) <= DCGM_KEYS
    categories = document["DCGM Diagnostic"]["test_categories"]
    assert [(c["category"], [t["name"] for t in c["tests"]]) for c in categories] == [
        ("Deployment", ["software"]), ("Integration", ["pcie"]), ("Hardware", ["diagnostic"])]
    lines = result.stdout.split("\n")
    assert lines[:3] == ["{", "\t\"DCGM Diagnostic\" : ", "\t{"]
    assert all(re.match(r'^\t*("[^"]+" : .*|[\[\]{}],?|".*",?|-?\d+,?)$', line)
               for line in lines[:-1]), lines
    assert result.stdout.endswith("}\n")
    names = [line.strip().split('"')[1] for line in lines if line.strip().startswith('"')
             and " : " in line and line.startswith("\t\t\t\t\t\t\t\t\"")]
    assert names[:4] == sorted(names[:4])


def test_dcgmi_diagnostic_info_lines_like_dcgm_4() -> None:
    """The FP64 test's info lines of a real DCGM 4 run (NVIDIA/DCGM#215, capture 20 B):
    the allocation line, the precisions, ``GPU N calculated at approximately N gigaflops
    during this test``."""
    document = json.loads(sim("dcgmi", ["diag", "-r", "3", "-j"]).stdout)
    test = document["DCGM Diagnostic"]["test_categories"][2]["tests"][0]
    info = test["results"][0]["info"]
    assert [mask(line) for line in info] == [
        "Allocated space for N output matricies from N bytes available.",
        "Running with precisions: FPN N, FPN N, FPN N",
        "GPU N calculated at approximately N gigaflops during this test"]


def test_every_fixture_here_has_its_provenance() -> None:
    """Each copied or made capture is named in its folder's PROVENANCE.md (``name.*`` for
    a run's two streams)."""
    for folder in ("real/runs", "real/ib"):
        listed = (FIXTURES / folder / "PROVENANCE.md").read_text()
        for path in Path(FIXTURES / folder).iterdir():
            if path.name == "PROVENANCE.md":
                continue
            both = path.name.rsplit(".", 1)[0] + ".*"
            assert f"| {path.name} |" in listed or f"| {both} |" in listed, path.name
