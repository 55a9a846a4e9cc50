"""Reading a saved snapshot (``run --from-snapshot FILE [--previous FILE]``) as hostile input.

A snapshot shipped from a broken node is judged elsewhere, so the file may be anything:
a FIFO (an open that blocks), ``/dev/zero`` (a read that never ends), a huge or deeply
nested JSON document, another schema (an earlier one, in READABLE_SCHEMAS, is brought to
the current one by agent/model/upgrade.py), NaN where a number belongs, a node name holding
control characters that the renderers or ``--exclude-file`` would write out, a number no
collector writes (agent/run/snapshot_values.py). The file is
read with agent/base/safefile.py (regular files only, opened without blocking, at most
MAX_BYTES) and every problem is a UsageError (exit 2) of one bounded line naming the file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ...checks.core.rates import sample_interval
from ..base.errors import UsageError
from ..base.hostname import is_node_name, same_host
from ..base.safefile import describe, read_regular
from ..model import READABLE_SCHEMAS, SNAPSHOT_SCHEMA, Snapshot
from ..model.serde import SerdeError
from . import snapshot_values as values

# A DGX H100 snapshot is ~150 KB; one listing every line of a large kernel log a few MB.
MAX_BYTES = 64 << 20
_MAX_REASON = 160
_MAX_PATH = 100  # a path is made of the file's own keys, which may be any length


def _one_line(text: str, limit: int = _MAX_REASON) -> str:
    """``text`` as one printable line of at most ``limit`` characters."""
    flat = "".join(c if c.isprintable() else "?" for c in text)
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."


def load_snapshot(path: Path, flag: str = "--from-snapshot") -> Snapshot:
    """The snapshot in ``path``; a UsageError naming ``flag`` and the file otherwise."""
    where = _one_line(f"{flag} {path}")
    try:
        raw = read_regular(path, MAX_BYTES, follow=True)
    except OSError as exc:
        raise UsageError(f"{where}: cannot read ({_one_line(describe(exc))})") from None
    try:
        data = json.loads(raw, parse_constant=values.parse_constant,
                          parse_float=values.parse_float, parse_int=values.parse_int)
    # JSONDecodeError and UnicodeDecodeError are ValueErrors; nesting deeper than the
    # parser recurses is a RecursionError.
    except (ValueError, RecursionError):
        raise UsageError(f"{where}: not JSON") from None
    if not isinstance(data, dict):
        raise UsageError(f"{where}: not a clusterdiag snapshot (not a JSON object)")
    tag = data.get("schema")
    if tag not in READABLE_SCHEMAS:
        what = "no schema tag" if tag is None else f"schema {_one_line(str(tag))!r}"
        raise UsageError(f"{where}: not a {SNAPSHOT_SCHEMA} snapshot ({what})")
    shown, total = values.out_of_range(data)
    if shown:
        count = "a value" if total == 1 else f"{total} values"
        paths = ", ".join(_one_line(entry, _MAX_PATH) for entry in shown)
        raise UsageError(f"{where}: {count} out of range: {paths}")
    try:
        snap = Snapshot.from_dict(data)
    except (SerdeError, TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise UsageError(f"{where}: malformed snapshot: {_one_line(str(exc))}") from None
    if not is_node_name(snap.node):
        raise UsageError(f"{where}: malformed snapshot: $.node is not a host name")
    if not math.isfinite(snap.taken_at) or snap.taken_at <= 0:
        raise UsageError(f"{where}: malformed snapshot: $.taken_at is not a time")
    return snap


def load_pair(current: Path, previous: Path | None) -> tuple[Snapshot, Snapshot | None]:
    """The snapshot to judge and, for the rate checks, an earlier one of the same node."""
    snap = load_snapshot(current)
    if previous is None:
        return snap, None
    before = load_snapshot(previous, "--previous")
    where = _one_line(f"--previous {previous}")
    if not same_host(before.node, snap.node):
        raise UsageError(f"{where}: node {before.node} is not the snapshot's node {snap.node}")
    if sample_interval(before, snap) is None:
        raise UsageError(f"{where}: not an earlier snapshot of this boot (or of 1 s to 30 "
                         "days before, by the wall clock); rates need the earlier one here")
    return snap, before
