"""``report merge``: saved node reports in, summaries and reasons out.

A bad file never stops the merge: it becomes a reason that cluster.reachability reports,
naming the file. A node given twice keeps its newest report (``started_at``), whatever
the order of the arguments: a month-old pass must not hide today's fail; the older file
is named in a cluster.reachability warn, so the operator knows it was left out.
A file is read only if it is a regular file, opened without blocking (a FIFO would hang
the merge, ``/dev/zero`` never end), and at most MAX_BYTES of it.
Ten thousand reports are ~400 MB of JSON, so parsing them spreads over the CPUs (each
worker returns only the folded summaries) and no report is kept whole.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path

from ...agent.base.errors import UsageError
from ...agent.base.hostname import is_node_name
from ...agent.base.safefile import file_kind
from ...checks.core.finding import Status
from ..cluster_checks import Unreachable
from ..model.summary import BadReport, NodeSummary, summarize

# Below this many files a worker pool costs more to start than it saves.
PARALLEL_FROM = 200
# A node report is ~80 KB (DGX H100); the largest node's is a few MB.
MAX_BYTES = 64 << 20
LEFT_OUT = "an older report of a node given twice was left out (the newest is used)"


def read_report(path: str) -> NodeSummary | Unreachable:
    try:
        raw = _read_regular(path)
    except OSError as exc:
        return Unreachable(f"cannot read file ({exc.strerror or exc})", file=path)
    if len(raw) > MAX_BYTES:
        return Unreachable(f"file is larger than {MAX_BYTES >> 20} MiB", file=path)
    try:
        data = json.loads(raw)
    # JSONDecodeError and UnicodeDecodeError are ValueErrors; nesting deeper than the
    # parser recurses is a RecursionError.
    except (ValueError, RecursionError):
        return Unreachable("file is not JSON", file=path)
    try:
        return summarize(data)
    except BadReport as exc:
        node = data.get("node") if isinstance(data, dict) else None
        return Unreachable(str(exc), node=node if is_node_name(node) else None, file=path)


def _read_regular(path: str) -> bytes:
    """Up to MAX_BYTES + 1 bytes of ``path``; OSError unless it is a regular file.

    A read asks for the file's size plus one byte, not MAX_BYTES + 1: CPython allocates
    the whole size asked for before it reads (Modules/_io/bufferedio.c,
    ``_bufferedreader_read_generic``: ``PyBytes_FromStringAndSize(NULL, n)``), and a 64 MiB
    allocation per file, given back at once, cost more than the read of a 60 KB report. A
    file that grew since ``fstat``, or reports no size (procfs), fills that first read and
    is read on, still bounded."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        first = min(info.st_size, MAX_BYTES) + 1
        data = handle.read(first)
        if len(data) < first or first > MAX_BYTES:
            return data
        return data + handle.read(MAX_BYTES + 1 - first)


def _read_chunk(paths: Sequence[str]) -> list[tuple[str, NodeSummary | Unreachable]]:
    return [(p, read_report(p)) for p in paths]


def expand(args: Iterable[str]) -> list[str]:
    """Files as given; a directory stands for the ``*.json`` files in it.

    An argument that is there but is neither a directory nor a regular file (a FIFO,
    ``/dev/zero``) is the user's mistake, not a bad report: UsageError naming it, found by
    ``stat`` (which neither opens nor blocks). One absent is a bad file like any other."""
    paths: list[str] = []
    for arg in args:
        try:
            mode = os.stat(arg).st_mode
        except OSError:
            mode = stat.S_IFREG
        if stat.S_ISDIR(mode):
            paths.extend(sorted(str(p) for p in Path(arg).glob("*.json")))
        elif stat.S_ISREG(mode):
            paths.append(arg)
        else:
            raise UsageError(f"report merge: {arg}: not a regular file ({file_kind(mode)})")
    return paths


def merge_files(paths: Sequence[str], workers: int | None = None
                ) -> tuple[list[NodeSummary], list[Unreachable]]:
    """Summaries by node (the newest report of a node given twice) and the failures."""
    workers = workers or os.cpu_count() or 1
    if workers > 1 and len(paths) >= PARALLEL_FROM:
        size = max(50, len(paths) // (workers * 8))
        chunks = [paths[i:i + size] for i in range(0, len(paths), size)]
        with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as pool:
            results = [r for chunk in pool.map(_read_chunk, chunks) for r in chunk]
    else:
        results = _read_chunk(paths)
    summaries: dict[str, tuple[str, NodeSummary]] = {}
    failures: list[Unreachable] = []
    for path, result in results:
        if not isinstance(result, NodeSummary):
            failures.append(result)
            continue
        kept = summaries.get(result.node)
        if kept is not None and _older(result, kept[1]):
            failures.append(Unreachable(LEFT_OUT, file=path, status=Status.WARN))
            continue
        if kept is not None:
            failures.append(Unreachable(LEFT_OUT, file=kept[0], status=Status.WARN))
        summaries[result.node] = path, result
    # A bad file naming a node that another file does report for blames the file alone.
    failures = [replace(f, node=None) if f.node in summaries else f for f in failures]
    return [summary for _, summary in summaries.values()], failures


def _older(new: NodeSummary, kept: NodeSummary) -> bool:
    """Whether ``new`` began before ``kept``; a tie keeps the later argument."""
    if new.started_at is None or kept.started_at is None:
        return False
    return new.started_at < kept.started_at
