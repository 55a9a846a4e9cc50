"""nccl-tests' ``all_reduce_perf`` as v2.19.6 prints it (NVIDIA/nccl-tests @ a0b82b2260cf,
``src/common.h:9``), for one node or for a job over several.

The lines, in order (file:line of that tree, extracted under /tmp/research/src/nccl-tests):
the header (util.cu:623-640: version, ``# Collective test starting``, ``# nThread ...``
with the argv's ``-w``/``-n`` and ``unalign: 0``, ``#``), ``# Using devices`` (util.cu:667)
and one ``#  Rank`` line per GPU in CUDA ordinal order (util.cu:676-687), NCCL's own
``NCCL INFO`` lines (NCCL debug.cc:330,354), the result header (util.cu:742-759), one row
per size (util.cu:457 and 508, numbers through ``getFloatStr`` util.cu:487-492), the footer
(util.cu:777-780), ``#`` (util.cu:856) and a blank line (util.cu:838-843). Units: time in
µs, algbw and busbw in GB/s (10^9 bytes).

Without ``MPI=1`` (src/Makefile:9, the default build) every task a launcher starts is a job
of its own (common.cu:1480: one process, rank 0): N nodes print N complete single-node
outputs. With it, rank 0 prints one header and every rank's device line in rank order
(util.cu:697-707) and one table. The real runs and failures this follows are in
/tmp/research/runs/nccl_*.txt (tests/fixtures/real/runs/).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .state.hardware import SimNode
from .toolkit import NotModelled, Printed, loader_error

VERSION = "2.19.6"  # src/common.h:9
NOT_MODELLED = "nccl-tests option not simulated"
# getopt_long's option string and long names (common.cu:1166-1205).
_SHORT = "t:g:b:e:i:f:n:m:w:N:p:I:K:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:"
_LONG = {"nthreads": "t", "ngpus": "g", "minbytes": "b", "maxbytes": "e", "stepbytes": "i",
         "stepfactor": "f", "iters": "n", "agg_iters": "m", "warmup_iters": "w",
         "run_cycles": "N", "parallel_init": "p", "check": "c", "op": "o", "datatype": "d",
         "root": "r", "blocking": "z", "stream_null": "y", "timeout": "T", "cudagraph": "G",
         "report_cputime": "C", "report_timestamps": "S", "output_file": "J",
         "average": "a", "local_register": "R", "cta_policy": "x",
         "device_implementation": "D", "device_cta_count": "V", "memory": "M",
         "unalign": "u", "per_iter_timing": "I", "per_iter_skip": "K", "help": "h"}
# The options whose effect on the output is simulated; any other is refused as not
# simulated rather than printed wrongly.
_MODELLED = set("tgbeifnwmcuh")
# common.cu:1360-1405, as the real binary prints it (research runs/nccl_help.txt).
USAGE = ("USAGE: {} \n\t[-t,--nthreads <num threads>] \n\t[-g,--ngpus <gpus per thread>] \n\t"
         "[-b,--minbytes <min size in bytes>] \n\t[-e,--maxbytes <max size in bytes>] \n\t"
         "[-i,--stepbytes <increment size>] \n\t[-f,--stepfactor <increment factor>] \n\t"
         "[-n,--iters <iteration count>] \n\t[-m,--agg_iters <aggregated iteration count>] "
         "\n\t[-w,--warmup_iters <warmup iteration count>] \n\t[-N,--run_cycles <cycle count>"
         " run & print each cycle (default: 1; 0=infinite)] \n\t[-p,--parallel_init <0/1>] "
         "\n\t[-c,--check <check iteration count>] \n\t"
         "[-o,--op <sum/prod/min/max/avg/mulsum/all>] \n\t[-d,--datatype <nccltype/all>] \n\t"
         "[-r,--root <root>] \n\t[-z,--blocking <0/1/2/3> 1=barrier after each inner iter "
         "(-m), 2=no barrier, 3=wait and barrier after each outer iter (-n)] \n\t"
         "[-y,--stream_null <0/1>] \n\t[-T,--timeout <time in seconds>] \n\t"
         "[-G,--cudagraph <num graph launches>] \n\t[-C,--report_cputime <0/1>] \n\t"
         "[-S,--report_timestamps <0/1> report timestamps (default 0)] \n\t"
         "[-J,--output_file <file> write output to filepath, if accessible. Infer type from "
         "suffix (only json supported presently.)] \n\t[-a,--average <0/1/2/3> report "
         "average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>] \n\t[-R,--local_register "
         "<0/1/2> enable local (1) or symmetric (2) buffer registration on send/recv buffers "
         "(default: disable (0))] \n\t[-x,--cta_policy <0/1/2> set CTA policy "
         "(NCCL_CTA_POLICY_DEFAULT (0), NCCL_CTA_POLICY_EFFICIENCY (1), NCCL_CTA_POLICY_ZERO "
         "(2)) (default: do not set)] \n\t[-D,--device_implementation <implementation "
         "number> enable device implementation (default: 0, use NCCL implementation; requires"
         " -R 2 if > 0)] \n\t[-V,--device_cta_count <number> set number of CTAs for device "
         "implementation (default: 16)] \n\t[-M,--memory <0/1> enable memory usage report "
         "(default: 0)] \n\t[-u,--unalign <index of first element> Misalign source and "
         "destination buffers (default: 0)] \n\t[-I,--per_iter_timing <0/1> per-iteration "
         "CUDA event timing\n\t    (best with -z 0, -z 2, or -z 3; with -z 1 includes barrier"
         " wait;\n\t    i_p99 uses nearest-rank percentile and may equal i_max\n\t    with "
         "<100 samples) (default: 0)] \n\t[-K,--per_iter_skip <count> exclude leading samples"
         " from -I summary stats (default: 0)] \n\t[-h,--help]\n")
_GIB = 1 << 30



@dataclass
class Args:
    """The parsed command line, defaults as common.cu:90-114 sets them."""

    program: str
    threads: int = 1
    gpus: int = 1
    min_bytes: int = 32 << 20
    max_bytes: int = 32 << 20
    step_bytes: int = 1 << 20
    step_factor: int = 1
    iters: int = 20
    warmup: int = 1
    agg: int = 1
    check: int = 1
    unalign: int = 0

    def sizes(self) -> list[int]:
        """The sizes of the sweep (common.cu:936), each a whole number of floats."""
        out: list[int] = []
        size = self.min_bytes
        while size <= self.max_bytes and len(out) < 4096:
            out.append(size // 4 * 4)
            size = size * self.step_factor if self.step_factor > 1 else size + self.step_bytes
            if size == 0:
                break
        return out


def _strtol(text: str) -> int:
    """strtol(text, NULL, 0): decimal, 0x hex or 0 octal, the leading number only."""
    text = text.strip()
    sign = -1 if text.startswith("-") else 1
    text = text.lstrip("+-")
    base, digits = 10, "0123456789"
    if text[:2].lower() == "0x":
        base, digits, text = 16, "0123456789abcdefABCDEF", text[2:]
    elif text.startswith("0") and len(text) > 1:
        base, digits = 8, "01234567"
    end = 0
    while end < len(text) and text[end] in digits:
        end += 1
    return sign * int(text[:end], base) if end else 0


def parsesize(value: str) -> int | None:
    """common.cu:227-250: a number with an optional K/M/G suffix (binary); None: invalid."""
    text = value.strip()
    number = ""
    while text and (text[0].isdigit() or (text[0] in ".+-eE" and number != "")
                    or (text[0] in "+-." and number == "")):
        number, text = number + text[0], text[1:]
    try:
        size = float(number)
    except ValueError:
        return None
    rest = text.strip()
    if not rest:
        return int(size)
    units = {"G": _GIB, "M": 1 << 20, "K": 1 << 10}.get(rest[0].upper())
    return None if units is None else int(size * units)


def _getopt(argv: list[str]) -> tuple[list[tuple[str, str]], str | None]:
    """GNU getopt_long over ``_SHORT``/``_LONG``: the options in order, and getopt's own
    complaint (stderr) when one is unknown or lacks its argument (then ``?``)."""
    prog, i = argv[0], 1
    out: list[tuple[str, str]] = []
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            break
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            match = [n for n in _LONG if n == name] or [n for n in _LONG if n.startswith(name)]
            if len(match) != 1:
                return out, f"{prog}: unrecognized option '{arg}'\n"
            letter = _LONG[match[0]]
            if letter == "h":
                out.append(("h", ""))
            elif eq:
                out.append((letter, value))
            elif i + 1 < len(argv):
                i += 1
                out.append((letter, argv[i]))
            else:
                return out, f"{prog}: option '--{match[0]}' requires an argument\n"
        elif arg.startswith("-") and len(arg) > 1:
            j = 1
            while j < len(arg):
                letter = arg[j]
                where = _SHORT.find(letter)
                if where < 0 or letter == ":":
                    return out, f"{prog}: invalid option -- '{letter}'\n"
                if _SHORT[where + 1:where + 2] != ":":
                    out.append((letter, ""))
                    j += 1
                    continue
                if j + 1 < len(arg):
                    out.append((letter, arg[j + 1:]))
                elif i + 1 < len(argv):
                    i += 1
                    out.append((letter, argv[i]))
                else:
                    return out, f"{prog}: option requires an argument -- '{letter}'\n"
                break
        i += 1
    return out, None


def parse(argv: list[str]) -> Args | Printed:
    """The arguments, or what the real binary prints instead: the usage on ``-h`` or a bad
    option (exit 0, common.cu:1358-1405), a bad size (exit 255, common.cu:1217-1230) or
    sizes the wrong way round (exit 255, common.cu:1407-1411)."""
    args = Args(argv[0].rsplit("/", 1)[-1])
    options, complaint = _getopt(argv)
    for letter, value in options:
        if letter not in _MODELLED:
            raise NotModelled(f"{NOT_MODELLED}: -{letter}")
        if letter == "h":
            return Printed(USAGE.format(args.program))
        if letter in "bei":
            size = parsesize(value)
            if size is None or size < 0:
                name = {"b": "minbytes", "e": "maxbytes", "i": "stepBytes"}[letter]
                return Printed("", f"invalid size specified for '{name}'\n", 255)
            setattr(args, {"b": "min_bytes", "e": "max_bytes", "i": "step_bytes"}[letter],
                    size)
        else:
            setattr(args, {"t": "threads", "g": "gpus", "f": "step_factor", "n": "iters",
                           "w": "warmup", "m": "agg", "c": "check", "u": "unalign"}[letter],
                    _strtol(value))
    if complaint is not None:
        return Printed("invalid option '?'\n" + USAGE.format(args.program), complaint, 0)
    if args.min_bytes > args.max_bytes:
        return Printed("", f"invalid sizes for 'minbytes' and 'maxbytes': {args.min_bytes} > "
                           f"{args.max_bytes}\n", 255)
    if args.threads != 1 or args.unalign:
        raise NotModelled(f"{NOT_MODELLED}: -t {args.threads} -u {args.unalign}")
    return args


def float_str(value: float, width: int) -> str:
    """util.cu:487-492 getFloatStr: two decimals, then one, then none, then %e, whichever
    fits the width first."""
    for form in (f"{value:{width}.2f}", f"{value:{width}.1f}", f"{value:{width}.0f}"):
        if len(form) <= width:
            return form
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


def header(args: Args) -> list[str]:
    """util.cu:623-640 (no -m blocking, per-iteration timing or parallel init asked)."""
    step = (f"{args.step_factor}(factor)" if args.step_factor > 1
            else f"{args.step_bytes}(bytes)")
    return [f"# nccl-tests version {VERSION} nccl-headers={{code}} nccl-library={{code}}",
            f"# Collective test starting: {args.program}",
            f"# nThread {args.threads} nGpus {args.gpus} minBytes {args.min_bytes} maxBytes "
            f"{args.max_bytes} step: {step} warmup iters: {args.warmup} iters: {args.iters} "
            f"agg iters: {args.agg} validation: {args.check} graph: 0 unalign: {args.unalign}",
            "#"]


def nccl_code(node: SimNode) -> int:
    """NCCL_VERSION_CODE of the node's library (2.23.4 -> 22304)."""
    major, minor, patch = (int(p) for p in (node.nccl.library_version or "2.23.4").split("."))
    return major * 10000 + minor * 100 + patch


def pid_of(node: SimNode, salt: str = "") -> int:
    """A stable process id for the node's run."""
    return 2000 + int(hashlib.sha256(f"{node.name}/{salt}".encode()).hexdigest()[:6], 16) % 60000


def device_lines(node: SimNode, args: Args, rank0: int, pid: int) -> list[str]:
    """util.cu:676-687: one line per GPU of the process, CUDA ordinal order (the cudaDev
    of rank i is localRank*nThreads*nGpus + i; one process per node here, localRank 0)."""
    host = node.name.split(".", 1)[0]  # getHostName stops at the first dot (common.h:194)
    lines = []
    for i, gpu in enumerate(node.gpus[:args.gpus]):
        domain, bus, rest = gpu.bdf.split(":")
        device = rest.split(".")[0]
        lines.append(f"#  Rank {rank0 + i:2d} Group {0:2d} Pid {pid:6d} on {host:>10s} device "
                     f"{i:2d} [{int(domain, 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}]"
                     f" {gpu.name}")
    return lines


def too_few_gpus(node: SimNode, args: Args) -> Printed | None:
    """util.cu:679-683: more GPUs asked than the process sees: stderr, exit 5."""
    if args.gpus <= len(node.gpus):
        return None
    return Printed("", f"Invalid number of GPUs: {args.gpus} requested but only "
                       f"{len(node.gpus)} were found.\nPlease check the number of processes "
                       "and GPUs per process.\n", 5)


def memory_note(node: SimNode, args: Args) -> list[str]:
    """common.cu:1538-1546: maxBytes lowered to what the smallest GPU holds."""
    most = min(g.memory_bytes for g in node.gpus[:max(args.gpus, 1)])
    reserve = min(-(-most // (16 * _GIB)) * _GIB, 4 * _GIB)
    fits = (most - reserve - _GIB) // (3 if args.check else 2)
    if args.max_bytes <= fits:
        return []
    args.max_bytes = fits
    args.min_bytes = min(args.min_bytes, fits)
    return ["#", f"# Reducing maxBytes to {fits} due to memory limitation"]


def table(args: Args, ranks: int, busbw_at: Callable[[int, int], float]) -> tuple[
        list[str], float]:
    """The result header, one row per size and the footer (util.cu:742-780, 856), and the
    seconds the sweep takes (warm-up and timed iterations, both halves)."""
    blank = f"# {'':>10s}  {'':>12s}  {'':>8s}  {'':>6s}  {'':>6s}"
    lines = ["#", f"{blank}           out-of-place                       in-place          ",
             f"# {'size':>10s}  {'count':>12s}  {'type':>8s}  {'redop':>6s}  {'root':>6s}  "
             f"{'time':>7s}  {'algbw':>6s}  {'busbw':>6s}  {'#wrong':>6s}  {'time':>7s}  "
             f"{'algbw':>6s}  {'busbw':>6s}  {'#wrong':>6s} ",
             f"# {'(B)':>10s}  {'(elements)':>12s}  {'':>8s}  {'':>6s}  {'':>6s}  "
             f"{'(us)':>7s}  {'(GB/s)':>6s}  {'(GB/s)':>6s}  {'':>6s}  {'(us)':>7s}  "
             f"{'(GB/s)':>6s}  {'(GB/s)':>6s}  {'':>6s} "]
    factor = 2 * (ranks - 1) / ranks if ranks > 1 else 1.0  # all_reduce.cu AllReduceGetBw
    total, count, seconds = 0.0, 0, 0.0
    for size in args.sizes():
        row = f"{size:12d}  {size // 4:12d}  {'float':>8s}  {'sum':>6s}  {-1:6d}"
        for half in (0, 1):
            busbw = busbw_at(size, half)
            algbw = busbw / factor
            micros = size / (algbw * 1e3) if algbw > 0 else 0.0
            row += (f"  {float_str(micros, 7)}  {float_str(algbw, 6)}  "
                    f"{float_str(busbw, 6)}  {0:6g}")
            total, count = total + busbw, count + 1
            seconds += micros * 1e-6 * (args.iters * args.agg + args.warmup)
        lines.append(row)
    average = total / count if count else 0.0
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {average:g} ", "#",
              f"# Collective test concluded: {args.program}", "#", ""]
    return lines, seconds


def info_prefix(node: SimNode, pid: int) -> str:
    """NCCL's debug line prefix, hostname:pid:tid [cudaDev] (NCCL src/debug.cc:330,354)."""
    return f"{node.name.split('.', 1)[0]}:{pid}:{pid} [0] NCCL INFO "


def cuda_failure(node: SimNode, pid: int, message: str) -> Printed:
    """CUDACHECK at util.cu:674 then main's TESTCHECK (common.h:29-39, 81-91): stdout,
    exit 2 (research runs/nccl_all_reduce_plan.txt)."""
    host = node.name.split(".", 1)[0]
    return Printed(f"{host}: Test CUDA failure util.cu:674 '{message}'\n"
                   f" .. {host} pid {pid}: Test failure common.cu:1454\n", "", 2)


def single(node: SimNode, argv: list[str], env: Mapping[str, str],
           busbw_at: Callable[[int, int], float], network: str | None) -> Printed:
    """One process on one node: what a non-MPI build prints, or an MPI build run alone."""
    missing = library_missing(node)
    if missing:
        return loader_error(argv[0], missing)
    parsed = parse(argv)
    if isinstance(parsed, Printed):
        return parsed
    pid = pid_of(node, " ".join(argv))
    code = nccl_code(node)
    lines = [line.replace("{code}", str(code)) for line in header(parsed)]
    lines.append("# Using devices")
    if "libcuda.so.1" in node.missing_libraries:  # cudart finds no driver (util.cu:674)
        driver = cuda_failure(node, pid, "CUDA driver version is insufficient for CUDA "
                                         "runtime version")
        driver.stdout = "\n".join(lines) + "\n" + driver.stdout
        return driver
    failed = too_few_gpus(node, parsed)
    if failed is not None:
        failed.stdout = "\n".join(lines) + "\n"
        return failed
    lines += device_lines(node, parsed, 0, pid)
    lines += memory_note(node, parsed)
    if network is not None and env.get("NCCL_DEBUG", "").upper() == "INFO":
        lines.append(info_prefix(node, pid) + f"Using network {network}")
    rows, seconds = table(parsed, parsed.gpus, busbw_at)
    return Printed("\n".join(lines + rows), seconds=seconds)


def library_missing(node: SimNode) -> str | None:
    """The library all_reduce_perf cannot load here: libnccl.so.2 when the node has no
    host NCCL or the loader's path misses it."""
    if node.nccl.library_version is None or "libnccl.so.2" in node.missing_libraries:
        return "libnccl.so.2"
    return None


def group(nodes: Sequence[SimNode], argv: list[str], env: Mapping[str, str],
          busbw_at: Callable[[int, int], float], network: str | None,
          info: Sequence[str] = ()) -> Printed:
    """One task per node with ``-g`` GPUs each, as an MPI build prints it: rank 0's header,
    every rank's device line in rank order (util.cu:697-707, global rank
    proc*nThreads*nGpus+i, util.cu:674), one table over every rank."""
    first = nodes[0]
    for node in nodes:
        missing = library_missing(node)
        if missing:
            return loader_error(argv[0], missing)
    parsed = parse(argv)
    if isinstance(parsed, Printed):
        return parsed
    lines = [line.replace("{code}", str(nccl_code(first))) for line in header(parsed)]
    lines.append("# Using devices")
    for node in nodes:
        failed = too_few_gpus(node, parsed)
        if failed is not None:
            failed.stdout = "\n".join(lines) + "\n"
            return failed
    for proc, node in enumerate(nodes):
        lines += device_lines(node, parsed, proc * parsed.gpus, pid_of(node, " ".join(argv)))
    lines += memory_note(first, parsed)
    if network is not None and env.get("NCCL_DEBUG", "").upper() == "INFO":
        lines.append(info_prefix(first, pid_of(first, " ".join(argv))) +
                     f"Using network {network}")
    lines += [info_prefix(first, pid_of(first, " ".join(argv))) + text for text in info
              if env.get("NCCL_DEBUG", "").upper() == "INFO"]
    rows, seconds = table(parsed, parsed.gpus * len(nodes), busbw_at)
    return Printed("\n".join(lines + rows), seconds=seconds)


def nccl_failure(node: SimNode, pid: int, last_error: str) -> Printed:
    """An NCCL call of communicator set-up failing inside the group (initComms' NCCLCHECK
    of ncclGroupEnd, common.cu:221), through TESTCHECK at common.cu:1620 and main's at
    common.cu:1454 (common.h:41-54, 81-91): stdout, exit 3 (testNcclError, common.h:69-78);
    ``last_error`` is what ncclGetLastError returns (NCCL debug.cc:268)."""
    host = node.name.split(".", 1)[0]
    return Printed(f"{host}: Test NCCL failure common.cu:221 'unhandled cuda error (run with "
                   f"NCCL_DEBUG=INFO for details) / {last_error}'\n"
                   f" .. {host} pid {pid}: Test failure common.cu:1620\n"
                   f" .. {host} pid {pid}: Test failure common.cu:1454\n", "", 3)


def comm_line(nodes: Sequence[SimNode], gpus: int, mnnvl: bool) -> str:
    """NCCL's communicator line for rank 0 (NCCL src/init.cc:1422)."""
    return (f"comm 0x{0x55d0c0a1b2c0 + len(nodes):x} rank 0 nRanks {gpus * len(nodes)} "
            f"nNodes {len(nodes)} localRanks {gpus} localRank 0 MNNVL {int(mnnvl)}")
