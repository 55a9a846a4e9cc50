"""gpu-burn (wilicc/gpu-burn @ 3ead140434da, gpu_burn-drv.cpp, extracted under
/tmp/research/src/gpu-burn) as it runs with its stdout a pipe, as under ssh or srun.

Arguments are read as gpu_burn-drv.cpp:824-914 reads them, quirks included: ``-h``,
``-l``, ``-d`` and ``-tc`` are substring tests on every argument (the ``-c`` path too,
since ``-c`` does not advance past it), ``-m``/``-i``/``-c`` compare two characters,
``-stts`` compares only ``-s``; TIME is ``argv[1 + thisParam]``. The compare kernel is
``compare.fatbin`` relative to the working directory unless ``-c`` names it (:33, :821);
each child opens it after allocating (:238-244) and, without it, dies with exit 124 (:343-346);
when every child is dead the parent says so and exits 123 (:603-606).

The order of a healthy run through a pipe: ``nvidia-smi -L`` (run by system() before the
fork, :677) first; the parent's buffered ``Using compare file``/``Burning for`` lines
(:913-914) come out with its first progress print, which flushes (:580); progress prints
are ``\\r``-separated (:552-578), one per wake-up of the parent's select (each child's report
and each temperature line), with a ``Summary at:`` block each 10 % of the run (:586-592);
then ``Killing processes with SIGTERM`` (:612) and a 30 s wait (:620); each child's
buffered lines (the two it inherited, then its own :187-197, :144-147) come out as it exits
after SIGTERM, in exit order; the parent's ``done`` and the verdict last (:660-664). The
real runs this follows, made with a stand-in driver, are /tmp/research/runs/gpuburn_*.txt
(tests/fixtures/real/runs/); the progress and verdict lines are those of the real capture
tests/fixtures/real/active/06_gpu_burn_*.txt.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from . import bandwidth as bw
from .state.hardware import SimNode
from .toolkit import (
    GPU_BURN_COMPARE,
    WORKING_DIRECTORY,
    NotModelled,
    Printed,
    atoi,
    loader_error,
)

COMPARE_KERNEL = "compare.fatbin"  # :33
OPS_PER_MUL = 1100048498688  # :38, flops of one 8192^3 GEMM
SIZE = 8192  # :31
USEMEM = 0.9  # :32
SIGTERM_TIMEOUT_S = 30  # :61
EINVAL, EMEDIUMTYPE, ENOMEDIUM = 22, 124, 123
INIT_S = 2.0  # a child's context, cuBLAS and buffers before its first GEMM (not measured)
TEMPS_EVERY_S = 5.0  # nvidia-smi -l 5 (:403)
# cudart's text for error 500 (CUDA_ERROR_NOT_FOUND), as libcudart.so.13 carries it; the
# driver's cuGetErrorString is taken to say the same (not seen: no driver here).
NOT_FOUND_TEXT = "named symbol not found"
# The line g++ gives __LINE__ in the checkError at :241-242 (the macro name's line; seen
# with g++ 12, the compiler of the research build).
COMPARE_CHECK_LINE = 241
HELP = ("GPU Burn\nUsage: gpu-burn [OPTIONS] [TIME]\n\n-m X\tUse X MB of memory.\n"
        "-m N%\tUse N% of the available GPU memory.  Default is 90%\n-d\tUse doubles\n"
        "-tc\tTry to use Tensor cores\n-l\tLists all GPUs in the system\n"
        "-i N\tExecute only on GPU N\n-c FILE\tUse FILE as compare kernel.  Default is "
        "compare.fatbin\n-stts T\tSet timeout threshold to T seconds for using SIGTERM to "
        "abort child processes before using SIGKILL.  Default is 30\n-h\tShow this help "
        "message\n\nExamples:\n  gpu-burn -d 3600 # burns all GPUs with doubles for an hour\n"
        "  gpu-burn -m 50% # burns using 50% of the available GPU memory\n"
        "  gpu-burn -l # list GPUs\n  gpu-burn -i 2 # burns only GPU of index 2\n")  # :778-799


@dataclass
class Args:
    doubles: bool = False
    tensor_cores: bool = False
    use_bytes: int = 0  # 0: USEMEM of free memory; < 0: that percentage
    device: int = -1
    kernel_file: str = COMPARE_KERNEL
    sigterm_s: int = SIGTERM_TIMEOUT_S
    run_s: int = 10
    run_given: bool = True


def _decode_usemem(text: str) -> int:
    """:804-812 decodeUSEMEM: NNN (MB), NN% (negative), 0 on a syntax error."""
    digits = len(text) - len(text.lstrip("+-"))
    while digits < len(text) and text[digits].isdigit():
        digits += 1
    if digits == 0 or not text[:digits].lstrip("+-"):
        return 0
    value, rest = int(text[:digits]), text[digits:]
    if rest.startswith("%"):
        return -value if rest == "%" else 0
    return value * 1024 * 1024 if rest == "" else 0


def parse(argv: list[str], node: SimNode) -> Args | Printed:
    """:814-914, argument by argument; the help, the GPU list or a syntax error instead."""
    args, this_param, i = Args(), 0, 1
    argc = len(argv)
    while i < argc:
        arg = argv[i]
        if "-h" in arg:
            return Printed(HELP)
        if "-l" in arg:  # :830-847 ("%ldMB" of bytes / 1000 / 1000)
            return Printed("".join(f"ID {g.index}: {g.name}, {g.memory_bytes // 1000 // 1000}MB"
                                   "\n" for g in node.gpus), "cuInit returned 0 (no error)\n")
        if "-d" in arg:
            args.doubles, this_param = True, this_param + 1
        if "-tc" in arg:
            args.tensor_cores, this_param = True, this_param + 1
        if argv[i].startswith("-m"):
            this_param += 1
            if argv[i][2:]:
                args.use_bytes = _decode_usemem(argv[i][2:])
            elif i + 1 < argc:
                i, this_param = i + 1, this_param + 1
                args.use_bytes = _decode_usemem(argv[i])
            else:
                return Printed("", "Syntax error near -m\n", EINVAL)
            if args.use_bytes == 0:
                return Printed("", "Syntax error near -m\n", EINVAL)
        if argv[i].startswith("-i"):
            this_param += 1
            if argv[i][2:]:
                args.device = _strtol(argv[i][2:])
            elif i + 1 < argc:
                i, this_param = i + 1, this_param + 1
                args.device = _strtol(argv[i])
            else:
                return Printed("", "Syntax error near -i\n", EINVAL)
        if argv[i].startswith("-c"):
            this_param += 1
            if i + 1 < argc:  # argv[argc] is NULL
                args.kernel_file, this_param = argv[i + 1], this_param + 1
        if argv[i].startswith("-s"):  # strncmp(argv[i], "-stts", 2)
            this_param += 1
            if i + 1 < argc:
                args.sigterm_s, this_param = atoi(argv[i + 1]), this_param + 1
        i += 1
    if argc - this_param < 2:
        args.run_given = False
    else:
        args.run_s = atoi(argv[1 + this_param])
    return args


def _strtol(text: str) -> int:
    """strtol(text, NULL, 0) for the decimal device numbers -i takes."""
    return atoi(text)


def _exists(path: str) -> bool:
    """Whether the compare kernel's path names the file on a simulated node: an absolute
    path, or one relative to the working directory (never the build folder)."""
    where = path if path.startswith("/") else f"{WORKING_DIRECTORY}/{path}"
    parts: list[str] = []
    for part in where.split("/"):
        if part == "..":
            parts = parts[:-1]
        elif part not in ("", "."):
            parts.append(part)
    return "/" + "/".join(parts) == GPU_BURN_COMPARE


def _date(when: float) -> str:
    """What ``date`` prints (the C locale's default format)."""
    stamp = time.gmtime(when)
    return time.strftime("%a %b ", stamp) + f"{stamp.tm_mday:2d}" + time.strftime(
        " %H:%M:%S UTC %Y", stamp)


@dataclass
class _Child:
    index: int  # the GPU's CUDA ordinal
    total_mb: int
    free_mb: int
    use_mb: int
    result_bytes: int
    iters: int
    batch_s: float  # seconds per batch of iters GEMMs


def _children(node: SimNode, args: Args, noise: list[float]) -> list[_Child]:
    word = 8 if args.doubles else 4
    result = word * SIZE * SIZE
    devices = [args.device] if args.device > -1 else [g.index for g in node.gpus]
    out = []
    for index in devices:
        if not 0 <= index < len(node.gpus):
            raise NotModelled(f"gpu_burn -i {index}: no such GPU (not simulated)")
        gpu = node.gpus[index]
        total = gpu.memory_bytes
        free = total - (600 << 20)  # the context's share (driver, cuBLAS)
        use = (int(free * USEMEM) if args.use_bytes == 0 else
               int(free * -args.use_bytes / 100) if args.use_bytes < 0 else args.use_bytes)
        iters = max((use - 2 * result) // result, 0)
        gflops = bw.gpu_gflops(node, index, args.doubles) * noise[index]
        out.append(_Child(index, total >> 20, free >> 20, use >> 20, result, iters,
                          iters * OPS_PER_MUL / (gflops * 1e9) if iters else 1.0))
    return out


def _initialized(child: _Child, args: Args) -> str:
    """:187-197."""
    kind = "using DOUBLES" if args.doubles else "using FLOATS"
    cores = ", using Tensor Cores" if args.tensor_cores else ""
    return (f"Initialized device {child.index} with {child.total_mb} MB of memory "
            f"({child.free_mb} MB available, using {child.use_mb} MB of it), {kind}{cores}\n"
            f"Results are {child.result_bytes} bytes each, thus performing {child.iters} "
            "iterations\n")


def _progress(elapsed_pct: float, calcs: list[int], gflops: list[float], errors: list[int],
              temps: list[int]) -> str:
    """:552-578, one print."""
    text = f"\r{elapsed_pct:.1f}%  proc'd: "
    text += "- ".join(f"{c} ({g:.0f} Gflop/s) " for c, g in zip(calcs, gflops, strict=True))
    text += "  errors: " + "- ".join(
        f"{e} " + (" (DIED!)" if c == -1 else " (WARNING!)" if e else "")
        for e, c in zip(errors, calcs, strict=True))
    text += "  temps: " + "- ".join(f"{t} C " if t else "-- " for t in temps)
    return text


def run(node: SimNode, argv: list[str], seed: int, attempt: int,
        noise: list[float]) -> Printed:
    """The stand-in; ``noise[i]`` is GPU i's run-to-run factor."""
    for library in ("libcuda.so.1", "libcublas.so.13"):
        if library in node.missing_libraries:
            return loader_error(argv[0], library)
    parsed = parse(argv, node)
    if isinstance(parsed, Printed):
        return parsed
    args = parsed
    head = ("Run length not specified in the command line. " if not args.run_given else "") + \
        f"Using compare file: {args.kernel_file}\nBurning for {args.run_s} seconds.\n"
    smi = "".join(f"GPU {g.index}: {g.name} (UUID: {g.uuid})\n" for g in node.gpus)
    children = _children(node, args, noise)
    errs = "".join("cuInit returned 0 (no error)\n" for _ in children)  # :315, each child
    if not _exists(args.kernel_file):
        return _no_compare_kernel(node, args, head, smi, children, errs)
    return _burn(node, args, head, smi, children, errs, random.Random(f"{seed}/{attempt}"))


def _no_compare_kernel(node: SimNode, args: Args, head: str, smi: str,
                       children: list[_Child], errs: str) -> Printed:
    """Every child dies after allocating (:238-244, :343-346), flushing its inherited lines
    and its own; the parent sees each pipe close (read returns 0, :508-511), prints
    ``(DIED!)`` progress, and exits 123 when none is left (:598-606)."""
    out, calcs = [smi], [0 for _ in children]
    message = (f"Error in couldn't find compare kernel: {args.kernel_file} "
               f"(gpu_burn-drv.cpp:{COMPARE_CHECK_LINE}): {NOT_FOUND_TEXT}")
    temps = [g.temperature for g in node.gpus][:len(children)]
    first = True
    for k, child in enumerate(children):
        out.append(head + _initialized(child, args))
        errs += f"Couldn't init a GPU test: {message}\n"
        calcs[k] = -1
        errs += "".join(f"read[{j}] error 0" for j in range(k + 1))
        elapsed = min(int(INIT_S) / args.run_s * 100.0 if args.run_s else 100.0, 100.0)
        out.append((head if first else "") + _progress(
            elapsed, calcs, [0.0] * len(children), [0] * len(children), temps))
        first = False
    errs += "\n\nNo clients are alive!  Aborting\n"
    return Printed("".join(out), errs, ENOMEDIUM, seconds=INIT_S)


def _burn(node: SimNode, args: Args, head: str, smi: str, children: list[_Child],
          errs: str, order: random.Random) -> Printed:
    """A healthy run: reports each batch once it is done (:356-374: the first pass waits on
    an event never recorded, which cuEventQuery answers CUDA_SUCCESS, NVIDIA's CUDA Driver
    API reference; each later pass waits on the batch before the one it queued), temperatures
    every 5 s, the loop ending at the first wake-up past the run length (:608-609)."""
    count = len(children)
    events: list[tuple[float, int]] = []  # (seconds since the parent listened, child or -1)
    for k, child in enumerate(children):
        when = INIT_S + child.batch_s
        while when <= args.run_s + 1 + child.batch_s:
            events.append((when, k))
            when += child.batch_s
    events += [(TEMPS_EVERY_S * n + 0.5, -1)
               for n in range(int((args.run_s + 1) / TEMPS_EVERY_S) + 2)]
    events.sort()
    calcs, gflops = [0] * count, [0.0] * count
    updated = [0.0] * count
    temps = [0] * count
    load = [g.temperature + 20 for g in node.gpus]
    start = time.time()
    out = [smi, head]
    next_report, reported = 10.0, False
    for when, who in events:
        if who >= 0:
            child = children[who]
            calcs[who] += child.iters
            gflops[who] = child.iters * OPS_PER_MUL / (when - updated[who]) / 1e9
            updated[who] = when
            reported = True
        else:
            temps = [load[c.index] for c in children]
        if reported:
            elapsed = min(int(when) / args.run_s * 100.0 if args.run_s else 100.0, 100.0)
            out.append(_progress(elapsed, calcs, gflops, [0] * count, temps))
            if next_report < elapsed:
                next_report = elapsed + 10.0
                out.append(f"\n\tSummary at:   {_date(start + when)}\n\n")
        if int(when) > args.run_s:
            break
    out.append("\nKilling processes with SIGTERM (soft kill)\n")
    exits = list(children)
    order.shuffle(exits)
    for child in exits:
        out.append(head + _initialized(child, args) +
                   f"Freed memory for dev {child.index}\nUninitted cublas\n")
    out.append(f"done\n\nTested {count} GPUs:\n" +
               "".join(f"\tGPU {k}: OK\n" for k in range(count)))
    return Printed("".join(out), errs, 0,
                   seconds=float(args.run_s) + INIT_S + args.sigterm_s)
