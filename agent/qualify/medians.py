"""The fleet's recent per-profile medians (``qualify --medians FILE``, ``qualify.medians_file``):
what a qualify run over several nodes measured, kept so that ``clusterdiag validate`` can
judge one node against peers it does not have when it runs alone.

One entry per peer group of qualify's node tests, the key :func:`judge.grade` groups by
(profile, test, kind of part, tool): the median figure, its unit, how many figures and
nodes it came from, and when. A group of fewer than ``qualify.min_peers`` nodes gives no
entry: one node's GPUs are not a fleet. Written whole and fsynced (agent/base/atomic.py),
merged with what the file already holds, so a run over one part of the fleet (one
profile, a few nodes) replaces only its own groups and keeps the others.

The file is read as hostile input: no link followed, no FIFO blocked on, never beyond
``MAX_BYTES`` (agent/base/safefile.py), at most ``MAX_ENTRIES`` entries, every field
checked (names bounded and printable, figures finite and positive, times finite): a
file that is not one is refused whole with one line saying why (:class:`MediansError`).
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ...checks.qualify.judge import FleetKey, Judged, component_kind
from ..base.atomic import write_atomic
from ..base.safefile import describe, read_regular

SCHEMA = "clusterdiag/qualify-medians/v1"
MAX_BYTES = 1 << 20
MAX_ENTRIES = 4096  # ~200 bytes each: 4096 fit the cap (profiles x node tests x kinds)
MAX_NAME = 64
MAX_COUNT = 10_000_000  # figures of one group: a million GPUs' worth, with room
CLOCK_SKEW_S = 300.0  # an entry this far in the future is a clock apart, not a bad file


class MediansError(ValueError):
    """The medians file cannot be used: one line naming the file and why."""


@dataclass(frozen=True)
class Median:
    profile: str
    test: str
    kind: str
    tool: str
    median: float
    unit: str
    figures: int
    nodes: int
    at: float  # seconds since the epoch

    @property
    def key(self) -> FleetKey:
        return self.profile, self.test, self.kind, self.tool


def from_run(judged: Iterable[Judged], min_nodes: int, at: float) -> list[Median]:
    """The median of each peer group of the run that spans at least ``min_nodes`` nodes."""
    groups: dict[FleetKey, list[Judged]] = defaultdict(list)
    for j in judged:
        f = j.figure
        groups[(j.profile, f.test, component_kind(f.component), f.tool)].append(j)
    out = []
    for key, items in sorted(groups.items()):
        nodes = len({j.figure.node for j in items})
        if nodes < min_nodes or not all(_name(part) for part in key):
            continue
        value = statistics.median(j.figure.value for j in items)
        if not (math.isfinite(value) and value > 0):
            continue
        out.append(Median(*key, round(value, 3), items[0].figure.unit, len(items), nodes, at))
    return out


def merge(old: Mapping[FleetKey, Median], new: Iterable[Median]) -> list[Median]:
    """``old`` with each group ``new`` measured replaced; the newest ``MAX_ENTRIES`` kept."""
    merged = dict(old)
    merged.update((m.key, m) for m in new)
    kept = sorted(merged.values(), key=lambda m: m.at, reverse=True)[:MAX_ENTRIES]
    return sorted(kept, key=lambda m: m.key)


def write(path: Path, entries: list[Median]) -> None:
    """The file replaced whole (OSError when its directory refuses)."""
    body = {"schema": SCHEMA, "medians": [asdict(m) for m in entries]}
    write_atomic(path, (json.dumps(body, indent=1) + "\n").encode())


def read(path: Path) -> dict[FleetKey, Median]:
    """The file's entries by key; MediansError when it is missing or is not a medians file."""
    try:
        raw = read_regular(path, MAX_BYTES)
    except OSError as exc:
        raise MediansError(f"{path}: {describe(exc)}") from None
    try:
        data = json.loads(raw)
        return {m.key: m for m in _entries(data)}
    except (ValueError, RecursionError) as exc:  # JSON's own errors are ValueErrors
        raise MediansError(f"{path}: {str(exc)[:200]}") from None


def _entries(data: Any) -> list[Median]:
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ValueError(f"not a {SCHEMA} file")
    items = data.get("medians")
    if not isinstance(items, list):
        raise ValueError("no list of medians")
    if len(items) > MAX_ENTRIES:
        raise ValueError(f"{len(items)} medians, more than {MAX_ENTRIES}")
    return [_entry(item, n) for n, item in enumerate(items)]


def _entry(item: Any, n: int) -> Median:
    where = f"median #{n}"
    if not isinstance(item, dict):
        raise ValueError(f"{where}: not an object")
    get: Callable[[str], Any] = item.get
    names = [get(k) for k in ("profile", "test", "kind", "tool", "unit")]
    if not all(_name(v) for v in names):
        raise ValueError(f"{where}: a name that is not a short printable string")
    value, at = get("median"), get("at")
    if not (_number(value) and value > 0):
        raise ValueError(f"{where}: median {_shown(value)} is not a positive number")
    if not (_number(at) and at >= 0):
        raise ValueError(f"{where}: at {_shown(at)} is not a time")
    counts = [get(k) for k in ("figures", "nodes")]
    if not all(isinstance(c, int) and not isinstance(c, bool) and 1 <= c <= MAX_COUNT
               for c in counts):
        raise ValueError(f"{where}: figures and nodes must be counts from 1 to {MAX_COUNT}")
    profile, test, kind, tool, unit = (str(v) for v in names)
    figures, nodes = counts
    return Median(profile, test, kind, tool, float(value), unit, figures, nodes, float(at))


def _name(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_NAME and value.isprintable()


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def _shown(value: Any) -> str:
    """A value of the file in a message: its JSON, bounded (NaN reads back as NaN)."""
    return json.dumps(value)[:40]


def recent(saved: Mapping[FleetKey, Median], profile: str, tests: Iterable[str], now: float,
           max_age_s: float) -> tuple[dict[FleetKey, float], list[Median]]:
    """The medians of ``profile``'s ``tests`` no older than ``max_age_s``, and those that
    are not (older, or later than this node's clock allows: a time no run can have had)."""
    wanted = set(tests)
    fresh: dict[FleetKey, float] = {}
    stale: list[Median] = []
    for key, m in saved.items():
        if m.profile != profile or m.test not in wanted:
            continue
        age = now - m.at
        if age > max_age_s or age < -CLOCK_SKEW_S:
            stale.append(m)
        else:
            fresh[key] = m.median
    return fresh, stale
