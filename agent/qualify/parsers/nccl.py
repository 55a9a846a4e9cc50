"""nccl-tests output (``all_reduce_perf``, ``alltoall_perf``, ``sendrecv_perf``, ...).

Every column layout since 2017 (NVIDIA/nccl-tests' ``src/common.cu``, by its history): the
leading fields (``bytes N type op``; ``size count type [redop|root]``; ``size count type
redop root``) and the per-half fields (``time algbw busbw #wrong|error|res`` plus ``i_*``
columns) are read from the table's own header line, and rows are read from the right,
because a blank ``redop`` (pre-2.13 alltoall) drops a token. A file may hold several runs,
each from its header to the next. The figure is the best bus bandwidth at the largest
message size of a run, never ``# Avg bus bandwidth`` (an average over every size of the
sweep).

Which job printed it: nccl-tests prints one ``#  Rank`` line per rank under ``# Using devices``
(src/util.cu:667, format at util.cu:687: ``"#  Rank %2d Group %2d Pid %6d on %10s device %2d
[%04x:%02x:%02x] %s"``; before v2.13 without ``Group``, and a bus id ``[0x00]``). Built with
MPI (src/Makefile ``MPI=1``), rank 0 gathers every process's lines and prints them in rank
order with global ranks (util.cu:697-707); without it, each process launched by srun or
mpirun is a job of its own, printing its own list from rank 0 (common.cu:1480). The parse
keeps the ranks of one job and the hosts they ran on (:attr:`ToolRun.ranks`, ``hosts``):
what ``--from-logs`` judges a log by, and what :func:`one_run` checks a multi-node figure
against. There is no ``# nRanks`` line in nccl-tests.

NCCL's own lines (``NCCL_DEBUG=INFO``) are read in any log, with or without a table: a log
of them alone is an NCCL log (tool ``nccl``), judged only by what its lines show, since
it has no figure and no summary to end with. See :func:`completion_status` for IB
completion errors and :class:`Transports` for the Socket fallback. Each of those, and each
WARN line, names the process that printed it (:class:`Ranks`) in a saved log, which may hold
many hosts' lines: its rank, host and GPU where the log maps the process to a rank, else its
host, pid and GPU. A run the agent made itself stays its node's finding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...model.qualify import Evidence, Figure, ToolRun
from .lines import number, numbered_lines, pick, reading

_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)(?:\s+(OK|FAILED))?")
_FAILURES = (
    re.compile(r"Test (?:NCCL|CUDA) failure"),
    re.compile(r"\bTest failure\b"),
    re.compile(r"Test timeout"),
)
# The test could not do what it was asked, which says nothing of the node's bandwidth: its
# arguments (an unknown option prints "invalid option" and the usage and exits 0; bad sizes
# "invalid size(s)": src/common.cu:1217-1230, 1358-1411), or more GPUs asked for than CUDA
# shows (util.cu:679-683; the passive checks judge a GPU CUDA cannot see).
# main()'s trace of a failure already printed: " .. <host> pid <n>: Test failure
# common.cu:<line>" (common.h TESTCHECK).
_TRACE = re.compile(r"^\.\. \S+ pid \d+: Test failure ")
_USAGE = re.compile(r"^(?:USAGE: |invalid option |invalid sizes? |Invalid number of GPUs)")
_WARN = re.compile(r"\bNCCL WARN\b")
# An IB work completion as NCCL words it: before 2.20 "with error %d, opcode %d, len %d,
# vendor err %d" (v2.19.4 src/transport/net_ib.cc:1333); 2.20 to 2.28.3 "with status=%d
# opcode=%d len=%d vendor err %d" (v2.20.3 net_ib.cc:1696); since 2.28.7 "with
# status=%s(%d) opcode=%s(%d) ... vendor_err=%u" (v2.28.7 net_ib.cc:2543, v2.29.2
# src/transport/net_ib/p2p.cc:550). A TRACE build prints the status=%d wording for every
# successful completion too (p2p.cc ncclIbCompletionEventProcess).
_COMPLETION = re.compile(r"\bGot completion from peer .*? with "
                         r"(?:error (\d+)|status=(?:\w+\()?(\d+))")
# "host:pid:tid [cudaDev] ": the process an NCCL line comes from and the CUDA device it had
# (v2.4.2 src/misc/utils.cu:60-63; v2.29.2 src/debug.cc:368, 379, 382).
_PROCESS = re.compile(r"^([^\s:]+):(\d+):\d+ \[(\d+)\] ")
# The rank a process holds: "comm %p rank %d nranks %d cudaDev %d", then " nvmlDev %d"
# (v2.4.2 src/init.cu:921) or " busId %x" (v2.7.8 init.cc:843; %lx in v2.12.12
# init.cc:917) or both (v2.18.3 init.cc:1356, 1375: "... commId 0x%llx - Init START" and
# "- Init COMPLETE"); since 2.23 after the calling function's name (v2.23.4
# init.cc:1454, 1482), since 2.29 after "[Rank %d] " too (v2.29.2 init.cc:1664, 1692).
_COMM = re.compile(r"\bNCCL INFO .*\bcomm \S+ rank (\d+) n[Rr]anks (\d+) cudaDev (\d+)"
                   r"(?: nvmlDev \d+)?(?: busId ([0-9a-fA-F]+))?")
_EVIDENCE_LINE = re.compile(r"^line \d+: ")
_NETWORK = re.compile(r"\bNCCL INFO Using network (\S+)")
_VIA_NET = re.compile(r"\bNCCL INFO .* via NET/([^/]+)/")
_IB_USING = re.compile(r"\bNCCL INFO NET/IB : Using\b")
_SOCKET_USING = re.compile(r"\bNCCL INFO NET/Socket : Using\b")
LIBRARY_MARKERS = (re.compile(r"\bNCCL (?:INFO|WARN)\b"),)
_STARTING = re.compile(r"# Collective test starting:\s*(\S+)")
_BINARY = re.compile(r"\b(all_reduce|all_gather|alltoall|sendrecv|reduce_scatter|broadcast|"
                     r"reduce|gather|scatter|hypercube)_perf\b")
HEADER_HINT = re.compile(r"^#\s+(?:size|bytes)\s+(?:count|N)\s+type\b.*\bbusbw\b")
MARKERS = (re.compile(r"^#\s*nThread \d+ nGpus \d+"), re.compile(r"^nThread \d+ nGpus \d+"),
           HEADER_HINT, _FAILURES[0], re.compile(r"^USAGE: \w+_perf\b"))
_WRONG_NAMES = ("#wrong",)  # "error" (max relative error) and "res" are not counts
_USING = re.compile(r"^#\s*Using devices\s*$")
_RANK = re.compile(r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s")


@dataclass
class Layout:
    half: list[str]  # per-half column names, from "time" up to the next "time"
    timestamp: bool
    lead: int  # leading fields: size count type [redop] [root]
    blank_redop: bool  # pre-2.13 alltoall leaves the redop column empty

    def fits(self, fields: int) -> bool:
        return fields == self.lead + 2 * len(self.half) or (
            self.blank_redop and fields == self.lead - 1 + 2 * len(self.half))

    @property
    def busbw(self) -> int:
        return self.half.index("busbw")

    @property
    def wrong(self) -> int | None:
        for name in _WRONG_NAMES:
            if name in self.half:
                return self.half.index(name)
        return None


@dataclass
class Segment:
    layout: Layout
    rows: list[tuple[int, float | None, float | None, float, float]] = field(
        default_factory=list)  # size, busbw oop, busbw ip, wrong oop, wrong ip
    lines: list[int] = field(default_factory=list)  # each row's line in the output
    oob: tuple[int, str] | None = None
    avg: tuple[float | None, str | None] | None = None

    @property
    def complete(self) -> bool:
        return self.oob is not None and self.avg is not None


def completion_status(line: str) -> int | None:
    """The status of an IB work completion NCCL reports on the line, in any of its three
    wordings; None where the line reports none. Only a non-zero status is an error."""
    match = _COMPLETION.search(line)
    if match is None:
        return None
    return int(match.group(1) or match.group(2))


# ibv_wc_status (rdma-core libibverbs/verbs.h): 5 IBV_WC_WR_FLUSH_ERR, a request flushed
# from a queue pair an earlier error had already broken; 12 IBV_WC_RETRY_EXC_ERR and 13
# IBV_WC_RNR_RETRY_EXC_ERR, the peer did not answer: the peer, the path or this end.
_FLUSHED = 5
_UNANSWERED = (12, 13)


def _judge_completions(evidence: list[Evidence], completions: list[tuple[int, int]],
                       hosts: int) -> None:
    """A flushed request is the echo of an earlier error, never a verdict; an unanswered
    one, in a log of several hosts, is what every surviving rank prints when one peer dies,
    so it names nobody (a warning); alone on one host it is that host's fabric."""
    for index, status in completions:
        if status == _FLUSHED:
            evidence[index].kind = "warn"
            evidence[index].text += " (flushed: an earlier error broke the connection)"
        elif status in _UNANSWERED and hosts > 1:
            evidence[index].kind = "warn"
            evidence[index].text += (" (the peer did not answer: the peer, the path or this "
                                     "host; every surviving rank prints this when one dies)")


def process_key(line: str) -> str:
    """``host:pid`` of the NCCL line's prefix; "" for a line without one."""
    process = _PROCESS.match(line)
    return f"{process.group(1)}:{process.group(2)}" if process else ""


@dataclass(frozen=True)
class Rank:
    """A process's place in a communicator, as its ``comm ... rank`` line gives it."""

    rank: int
    nranks: int
    gpu: int  # cudaDev
    bus: str | None  # busId as NCCL prints it, where it does


@dataclass
class Ranks:
    """Which rank each NCCL process is, so that a finding names the rank, host and GPU a
    person must look at. A process may hold several communicators (a framework's world and
    its subgroups): the largest one's rank is its rank in the job; two of that size with
    different ranks leave it unnamed, since either could be meant."""

    held: dict[str, Rank] = field(default_factory=dict)  # process -> rank in largest comm
    unclear: set[str] = field(default_factory=set)

    def see(self, line: str) -> None:
        """Note the rank a ``comm ... rank`` line maps its process to."""
        comm = _COMM.search(line)
        key = process_key(line)
        if comm is None or not key:
            return
        bus = comm.group(4)
        rank = Rank(int(comm.group(1)), int(comm.group(2)), int(comm.group(3)), bus)
        known = self.held.get(key)
        if known is None or rank.nranks > known.nranks:
            self.held[key] = rank
            self.unclear.discard(key)
        elif rank.nranks == known.nranks and rank.rank != known.rank:
            self.unclear.add(key)

    def where(self, line: str) -> str | None:
        """``rank R on HOST GPU D (busId B)`` where the log maps the line's process to a
        rank, else ``HOST pid P GPU D`` from the line's own prefix; None without a prefix.
        A rank is only ever the one NCCL printed."""
        process = _PROCESS.match(line)
        if process is None:
            return None
        host, pid, device = process.groups()
        rank = self.held.get(f"{host}:{pid}")
        if rank is None or f"{host}:{pid}" in self.unclear:
            return f"{host} pid {pid} GPU {device}"
        bus = f" (busId {rank.bus})" if rank.bus else ""
        return f"rank {rank.rank} on {host} GPU {rank.gpu}{bus}"

    def locate(self, evidence: list[Evidence]) -> None:
        """Name the process of each evidence read from an NCCL line (socket, completion
        error, WARN) as its component, in place of the whole node."""
        for e in evidence:
            where = self.where(_EVIDENCE_LINE.sub("", e.text))
            if where is not None:
                e.component = where


@dataclass
class Transports:
    """Which network each NCCL process chose, from its own lines.

    ``Using network IB|Socket|<plugin>`` (src/init.cc, since 2.6.4: v2.6.4 init.cc:120)
    and the channel lines' ``via NET/<name>/`` (src/transport/net.cc) say which one
    carries the traffic. ``NET/Socket : Using`` alone does not: up to 2.4.2 every process
    set up sockets for bootstrap first, InfiniBand in use or not (v2.4.2 src/init.cu:127-128),
    and printed it next to ``NET/IB : Using [0]mlx5_0:1/IB``; it is a fallback only in a
    process that shows neither."""

    chosen: dict[str, set[str]] = field(default_factory=dict)  # process -> networks named
    first: dict[str, tuple[int, str]] = field(default_factory=dict)  # its first Socket line
    bare: dict[str, tuple[int, str]] = field(default_factory=dict)  # "NET/Socket : Using"

    def see(self, number_: int, line: str) -> bool:
        """Note the line if it names a transport; whether it did."""
        key = process_key(line)
        named = _NETWORK.search(line) or _VIA_NET.search(line)
        if named is not None:
            self.chosen.setdefault(key, set()).add(named.group(1))
            if named.group(1) == "Socket":
                self.first.setdefault(key, (number_, line))
            return True
        if _IB_USING.search(line):
            self.chosen.setdefault(key, set()).add("IB")
            return True
        if _SOCKET_USING.search(line):
            self.bare.setdefault(key, (number_, line))
            return True
        return False

    def fallbacks(self) -> list[Evidence]:
        """One ``socket`` evidence per process that ran over sockets, in line order."""
        lines = dict(self.first)
        for key, seen in self.bare.items():
            if key not in self.chosen:
                lines.setdefault(key, seen)
        return [Evidence("socket", "node", f"line {n}: {text}")
                for n, text in sorted(lines.values())]


def _layout(line: str) -> Layout | None:
    names = line.lstrip("#").split()
    times = [i for i, n in enumerate(names) if n in ("time", "cputime")]
    if not times or "busbw" not in names:
        return None
    end = times[1] if len(times) > 1 else len(names)
    half = names[times[0]:end]
    if "busbw" not in half:
        return None
    return Layout(half=half, timestamp=names[-1] == "timestamp", lead=times[0],
                  blank_redop="redop" in names[:times[0]] and "root" not in names)


def _row(fields: list[str], layout: Layout) -> tuple[int, float | None, float | None,
                                                      float, float] | None:
    if layout.timestamp:
        fields = fields[:-2]
    width = len(layout.half)
    if not layout.fits(len(fields)) or not fields[0].isdigit():
        return None
    halves = fields[-2 * width:-width], fields[-width:]
    busbw = [reading(h[layout.busbw]) for h in halves]
    wrong_at = layout.wrong
    wrong = [number(h[wrong_at]) or 0.0 if wrong_at is not None else 0.0 for h in halves]
    if busbw[0] is None and busbw[1] is None:
        return None
    return int(fields[0]), busbw[0], busbw[1], wrong[0], wrong[1]


def collective(text: str, default: str) -> str:
    """Which test a log is: from nccl-tests' own start line or the command in the log."""
    match = _STARTING.search(text) or _BINARY.search(text)
    if match is None:
        return default
    return match.group(1).removesuffix("_perf").replace("_", "")


def parse(text: str, run: ToolRun) -> None:
    """The run's figure per table, its failure lines and warnings. A CUDA failure before the
    first row of results is the test failing to start (a driver the passive checks judge, a
    launch where CUDA sees no GPU): an ``error`` evidence, never a node's failure; after it,
    and any NCCL failure (communication could not be set up), a failure of the run."""
    segments: list[Segment] = []
    devices: list[list[tuple[int, str]]] = []  # each "# Using devices" list: (rank, host)
    transports = Transports()
    ranks = Ranks()
    completions: list[tuple[int, int]] = []  # (index in run.evidence, its status)
    hosts: set[str] = set()
    for number_, line in numbered_lines(text):
        stripped = line.strip()
        ranks.see(stripped)
        if key := process_key(stripped):
            hosts.add(key.split(":", 1)[0])
        if stripped.startswith("#"):
            if _USING.match(stripped):
                devices.append([])
            elif rank := _RANK.match(stripped):
                if not devices:
                    devices.append([])  # a log cut above its "# Using devices"
                devices[-1].append((int(rank.group(1)), rank.group(2)))
        elif _USAGE.search(stripped):
            run.evidence.append(Evidence("error", "node", f"line {number_}: {stripped}"))
        elif status := completion_status(stripped):
            completions.append((len(run.evidence), status))
            run.evidence.append(Evidence("fail", "node", f"line {number_}: {stripped}"))
        elif any(p.search(stripped) for p in _FAILURES):
            starting = "Test CUDA failure" in stripped and not any(s.rows for s in segments)
            kind = "error" if starting else "fail"
            if _TRACE.search(stripped) and run.evidence:  # the failure above, passed up
                kind = run.evidence[-1].kind
            run.evidence.append(Evidence(kind, "node", f"line {number_}: {stripped}"))
        elif not transports.see(number_, stripped) and _WARN.search(stripped):
            run.evidence.append(Evidence("warn", "node", f"line {number_}: {stripped}"))
        if stripped.startswith("#"):
            if HEADER_HINT.match(stripped):
                layout = _layout(stripped)
                if layout is not None:
                    segments.append(Segment(layout))
                continue
            if segments and (oob := _OOB.match(stripped)):
                segments[-1].oob = (int(oob.group(1)), oob.group(2))
                if oob.group(2) == "FAILED":
                    run.evidence.append(Evidence("fail", "node", f"line {number_}: {stripped}"))
            elif segments and (avg := _AVG.match(stripped)):
                segments[-1].avg = (number(avg.group(1)), avg.group(2))
                if avg.group(2) == "FAILED":
                    run.evidence.append(Evidence("fail", "node", f"line {number_}: {stripped}"))
            continue
        if not segments:
            continue
        row = _row(stripped.split(), segments[-1].layout)
        if row is None:
            continue
        segments[-1].rows.append(row)
        segments[-1].lines.append(number_)
        if row[3] or row[4]:
            run.evidence.append(Evidence(
                "fail", "node", f"line {number_}: {int(row[3] + row[4])} wrong elements at "
                                f"{row[0]} B"))
    _judge_completions(run.evidence, completions, len(hosts))
    run.evidence += transports.fallbacks()
    if run.from_log:  # a saved log may span hosts; a run the agent made is its node's
        ranks.locate(run.evidence)
    run.complete = bool(segments) and all(s.complete for s in segments)
    for segment in segments:
        if not segment.rows:
            run.notes.append("a table header with no rows under it")
            continue
        largest = max(r[0] for r in segment.rows)
        read = [(b, at) for r, at in zip(segment.rows, segment.lines, strict=True)
                if r[0] == largest for b in r[1:3] if b is not None]
        if not read:
            continue
        best = pick([b for b, _ in read])
        found_at = next(at for b, at in read if b is best)
        where = "" if segment.complete else ", run did not finish"
        run.figures.append(Figure(run.node, run.test, "node", [best], "GB/s", "nccl-tests",
                                  f"busbw at {largest} B{where}", found_at))
    if run.tool == "nccl":
        run.complete = True  # NCCL's own lines: no table, no summary to end with
    elif not segments:
        run.notes.append("no nccl-tests table")
    _job(devices, run)


def _job(devices: list[list[tuple[int, str]]], run: ToolRun) -> None:
    """The run's ranks and hosts: those of the largest job in its device lists. A list in
    which a rank number repeats holds the interleaved lists of processes that were each a
    job of their own (a build without MPI under srun or mpirun): each host's lines are then
    one job."""
    jobs: list[list[tuple[int, str]]] = []
    for listed in devices:
        ranks = [rank for rank, _ in listed]
        if len(set(ranks)) == len(ranks):
            jobs.append(listed)
            continue
        for host in dict.fromkeys(h for _, h in listed):
            jobs.append([(r, h) for r, h in listed if h == host])
    jobs = [j for j in jobs if j]
    if not jobs:
        return
    job = max(jobs, key=lambda j: len({r for r, _ in j}))
    run.ranks = len({r for r, _ in job})
    run.hosts = tuple(dict.fromkeys(h for _, h in job))
    if len(jobs) > 1:
        run.notes.append(f"{len(jobs)} device lists (separate jobs or runs); the largest has "
                         f"{run.ranks} ranks on {len(run.hosts)} host(s)")


def one_run(run: ToolRun, nodes: int, gpus_per_node: int) -> str | None:
    """Why ``run`` is not one job over ``nodes`` nodes with every one of their GPUs, or None.

    A figure between nodes counts only when one nccl-tests job joined every rank: a build
    without MPI launched on each node prints a complete single-node run per node, whose
    busbw is the node's own NVLink figure (see the module's docstring), and a job that lost
    a rank or a host measured something else."""
    want = nodes * gpus_per_node
    if run.ranks is None:
        return ("nccl-tests printed no device list ('#  Rank' lines, src/util.cu:687): "
                "nothing shows that every rank took part in one run")
    if run.ranks == want and len(run.hosts) == nodes:
        return None
    why = (f"one nccl-tests job had {run.ranks} rank(s) on {len(run.hosts)} host(s) "
           f"({', '.join(run.hosts[:4])}{', ...' if len(run.hosts) > 4 else ''}) where "
           f"{nodes} node(s) x {gpus_per_node} GPU(s) = {want} ranks on {nodes} hosts "
           "were expected")
    if len(run.hosts) == 1 and nodes > 1:
        why += ("; independent single-node runs are no test between nodes: is nccl-tests "
                "built with MPI=1 and launched as one MPI job?")
    return why
