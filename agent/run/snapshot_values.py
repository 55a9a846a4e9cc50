"""The numbers of a saved snapshot, held to what a collector can have written.

Every number in a snapshot comes from a kernel file, NVML or the clock, and none of those
holds more than 64 bits: sysfs counters are ``u64`` (the IB port counters are printed with
``%llu``, Linux drivers/infiniband/core/sysfs.c ``show_pma_counter``), NVML's counters are
``unsigned long long`` (nvml.h ``nvmlDeviceGetTotalEccErrors``, ``nvmlDeviceGetPcieReplayCounter``)
and a count of anything is never below zero. A file holding ``1e400``, ``NaN``, a
10,000-digit integer or a counter of ``-1`` was therefore not written by clusterdiag: it is
corrupt or made up, and judging the rest of it could pass a broken node. Such a snapshot is
refused whole (exit 2, docs/design.md §3) with one line naming the first offending paths,
rather than judged with that one value turned into an ``error`` finding: the snapshot is a
single input, so nothing else in it is more trustworthy than the value that proves it was
not written by a collector.

The JSON parser hands each out-of-range number to ``json.loads`` hooks here, which keep it
as an ``OutOfRange`` marker so that the scan can say where it was (Python refuses to parse
an integer of more than 4,300 digits at all, and ``1e400`` parses to infinity).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# sign + the 20 digits of 2**64: anything longer is out of range whatever it says.
_MAX_INT_TEXT = 21
_LOW, _HIGH = -(1 << 63), 1 << 64
# Fields and maps whose integers count events or things (docs/formats.md#snapshot): the
# IB port counters, PCIe AER, NVLink error and remap histogram maps, EDAC, ECC, remapped
# and retired pages, PCIe replays, the time NVML spent throttled, and our own tallies.
COUNTER_MAPS = frozenset({"counters", "hw_counters", "correctable", "nonfatal", "fatal",
                          "errors", "remap_histogram", "clock_event_time_ns"})
COUNTER_FIELDS = frozenset({
    "corrected", "uncorrected", "ecc_volatile_corrected", "ecc_volatile_uncorrected",
    "ecc_aggregate_corrected", "ecc_aggregate_uncorrected", "remapped_corrected",
    "remapped_uncorrected", "retired_pages_sbe", "retired_pages_dbe", "pcie_replay_count",
    "lines_read", "dropped", "calls", "files_read"})
SHOWN = 3
_MAX_KEY = 40


@dataclass(frozen=True)
class OutOfRange:
    """A JSON number no collector writes, as the file spelled it (cut short)."""

    text: str


def parse_int(text: str) -> int | OutOfRange:
    if len(text) > _MAX_INT_TEXT:
        return OutOfRange(f"{text[:8]}... ({len(text)} characters)")
    return int(text)


def parse_float(text: str) -> float | OutOfRange:
    value = float(text)
    return value if math.isfinite(value) else OutOfRange(text[:24])


def parse_constant(name: str) -> OutOfRange:
    return OutOfRange(name)


def _why(key: str | int, parent: str | int, value: object) -> str | None:
    """Why ``value`` (under ``key`` in the map or list ``parent``) is out of range."""
    if isinstance(value, OutOfRange):
        return value.text
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    if not _LOW <= value < _HIGH:
        return "beyond 64 bits"
    if value < 0 and (key in COUNTER_FIELDS or parent in COUNTER_MAPS):
        return f"{value}, a negative count"
    return None


# A path as a chain of (parent, key) links, spelled only when reported: spelling each
# path as it is walked would copy every ancestor's keys (any length) once per value.
_Link = tuple["_Link | None", "str | int"]


def _spell(link: _Link) -> str:
    keys: list[str | int] = []
    at: _Link | None = link
    while at is not None:
        at, key = at
        keys.append(key)
    return "$" + "".join(f"[{k}]" if isinstance(k, int) else f".{k[:_MAX_KEY]}"
                         for k in reversed(keys[:-1]))


def out_of_range(data: object) -> tuple[list[str], int]:
    """The first SHOWN offending ``path (why)``, and how many there are in all."""
    shown: list[str] = []
    total = 0
    stack: list[tuple[_Link, str | int, object]] = [((None, ""), "", data)]
    while stack:
        link, parent, value = stack.pop()
        key = link[1]
        if isinstance(value, dict):
            stack.extend(((link, k), key, v) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend(((link, i), key, v) for i, v in reversed(list(enumerate(value))))
        elif (why := _why(key, parent, value)) is not None:
            total += 1
            if len(shown) < SHOWN:
                shown.append(f"{_spell(link)} ({why})")
    return shown, total
