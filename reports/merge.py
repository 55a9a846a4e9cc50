"""``report merge``: saved node reports in, summaries and reasons out.

A bad file never stops the merge: it becomes a reason that cluster.reachability reports,
naming the file. A node given twice keeps its newest report (``started_at``), whatever
the order of the arguments: a month-old pass must not hide today's fail; the older file
is named in a cluster.reachability warn, so the operator knows it was left out.
Ten thousand reports are ~400 MB of JSON, so parsing them spreads over the CPUs (each
worker returns only the folded summaries) and no report is kept whole.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path

from ..checks.finding import Status
from .cluster_checks import Unreachable
from .hostname import is_node_name
from .summary import BadReport, NodeSummary, summarize

# Below this many files a worker pool costs more to start than it saves.
PARALLEL_FROM = 200
LEFT_OUT = "an older report of a node given twice was left out (the newest is used)"


def read_report(path: str) -> NodeSummary | Unreachable:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        return Unreachable(f"cannot read file ({exc.strerror or exc})", file=path)
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


def _read_chunk(paths: Sequence[str]) -> list[tuple[str, NodeSummary | Unreachable]]:
    return [(p, read_report(p)) for p in paths]


def expand(args: Iterable[str]) -> list[str]:
    """Files as given; a directory stands for the ``*.json`` files in it."""
    paths: list[str] = []
    for arg in args:
        if os.path.isdir(arg):
            paths.extend(sorted(str(p) for p in Path(arg).glob("*.json")))
        else:
            paths.append(arg)
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
