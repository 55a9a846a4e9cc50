"""NCCL library versions remembered across runs, in a file of the state directory.

Reading ``ncclGetVersion`` means loading the library in a fresh interpreter (sources.py):
tens of milliseconds that the prolog without an agent report would pay on every job, and
``clusterdiag run`` on every call, though the library changes only on an upgrade. So a
version read is kept in ``nccl_versions.json`` beside the agent's state, keyed by the
library's path and the identity of its file (inode, size, mtime): a library replaced or
rewritten in place is probed again. Failures are never kept (sources.py retries them).

The file sits in a directory the agent's service user can write, and the prolog reads it
as root: it is hostile input. It is read without following links, up to a size cap, and
each entry is checked (an absolute path, plain integers in range); a file that fails any
of that is ignored whole, as if absent, and replaced at the next successful probe. Writing
it is best effort: a run that may not write the state directory still gets its answers.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING

from ..base.safefile import read_regular
from ..read import sources

if TYPE_CHECKING:
    from pathlib import Path

NAME = "nccl_versions.json"
MAX_BYTES = 64 << 10
MAX_ENTRIES = 64
MAX_PATH = 4096
# NCCL_VERSION_CODE: 2.8.4 is 2804, 2.21.5 is 22105; 99.99.99 is the most a code reads as.
MAX_CODE = 999999
_FIELDS = ("inode", "size", "mtime_ns", "code")


def parse(body: bytes) -> dict[str, tuple[sources.FileKey, int]] | None:
    """The cache's entries, or None when the file is not one this module wrote."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    entries = data.get("libraries") if isinstance(data, dict) else None
    if not isinstance(entries, dict) or len(entries) > MAX_ENTRIES:
        return None
    parsed: dict[str, tuple[sources.FileKey, int]] = {}
    for path, entry in entries.items():
        if not (path.startswith("/") and len(path) <= MAX_PATH and "\0" not in path
                and isinstance(entry, dict) and set(entry) == set(_FIELDS)):
            return None
        values = [entry[name] for name in _FIELDS]
        if not all(type(v) is int and v >= 0 for v in values) or not 0 < values[3] <= MAX_CODE:
            return None
        inode, size, mtime_ns, code = values
        parsed[path] = ((inode, size, mtime_ns), code)
    return parsed


def render(entries: dict[str, tuple[sources.FileKey, int]]) -> bytes:
    libraries = {path: dict(zip(_FIELDS, (*key, code), strict=True))
                 for path, (key, code) in sorted(entries.items())[:MAX_ENTRIES]}
    return json.dumps({"libraries": libraries}, separators=(",", ":")).encode()


class PersistedVersions:
    """``sources.nccl_versions`` with what it learns kept in ``path`` between runs."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _load(self) -> dict[str, tuple[sources.FileKey, int]]:
        try:
            body = read_regular(self.path, MAX_BYTES)
        except (OSError, ValueError):
            return {}
        return parse(body) or {}

    def _save(self, entries: dict[str, tuple[sources.FileKey, int]]) -> None:
        if not self.path.parent.is_dir():
            return  # no state directory (no agent here): not ours to create
        from ..base.atomic import write_atomic  # written only when a version was learnt

        with contextlib.suppress(OSError):
            write_atomic(self.path, render(entries))

    def __call__(self, paths: list[str], timeout_s: float) -> sources.NcclVersions:
        stored = self._load()
        for path, entry in stored.items():
            sources.remember_version(path, *entry)
        answers = sources.nccl_versions(paths, timeout_s)
        learned = {}
        for path in paths:
            known = sources.remembered_version(path)
            if known is not None:
                learned[path] = known
        if any(stored.get(path) != entry for path, entry in learned.items()):
            self._save({**stored, **learned})
        return answers
