"""What the agent keeps of a device between collections: the attributes fixed while it exists.

A PCI function's vendor, device and class ids, NUMA node, local CPU list, link
capability (``max_link_*``) and the bridges above it, and an RDMA device's identity
files (firmware, GUIDs, board, description), PCI function, NUMA node and link capability
are set when the kernel finds the device and stay until it goes (hot-plug, a rescan, a
driver's remove, a firmware reset): a device found again is a new sysfs directory, which
kernfs gives a new inode. So where keeping is on (the agent: ``keep``), a collector reads
them once and takes them again while the directory's identity (device and inode, one
``stat``) is unchanged and they are younger than the bound. A RoCE netdev's ECN
settings, set by hand like the PFC and trust whose answers the agent keeps
(daemon/commands.py), are kept the same way. On a dgx-h100 that is ~700 of the ~1,700
files the PCI and InfiniBand sources read every interval. Everything that
moves is read every collection: links' speed and width now, AER and port counters, port
states, LIDs, GIDs, the driver binding, ACS control.

Staleness, bounded: at most ``keep``'s seconds (the agent's ``agent.keep_s``,
120 s), also for what only someone's hand changes (ECN, a node description, a NUMA node
written to sysfs). At most ``MAX_KEPT`` devices are kept (a node has ~100). Keeping is
off unless switched on, so ``run``, ``snapshot``, the prolog and the other one-shot
paths read everything.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
MAX_KEPT = 4096

_lock = threading.Lock()
_keep_s = 0.0
# (kind, directory) -> (its identity, when read, what was read)
_kept: dict[tuple[str, str], tuple[tuple[int, int], float, object]] = {}


def keep(seconds: float) -> None:
    """Keep the fixed attributes for ``seconds`` (0: off, and forget what was kept)."""
    global _keep_s
    with _lock:
        _keep_s = seconds
        if seconds <= 0:
            _kept.clear()


def kept(kind: str, directory: str, read: Callable[[], T],
         whole: Callable[[T], bool] = lambda _: True) -> T:
    """``read()``'s answer for ``directory``, as read before while the directory is the
    same one and the answer younger than the keep time; else read now, and kept when
    ``whole(answer)`` (an answer missing a value it could not read is read again)."""
    if _keep_s <= 0:
        return read()
    try:
        info = os.stat(directory)
    except OSError:  # gone or unreadable: the collector reads it and says why
        return read()
    identity, now, key = (info.st_dev, info.st_ino), time.monotonic(), (kind, directory)
    with _lock:
        hit = _kept.get(key)
    if hit is not None and hit[0] == identity and now - hit[1] < _keep_s:
        return hit[2]  # type: ignore[return-value]  # stored by this kind's read() below
    value = read()
    if not whole(value):
        return value
    with _lock:
        if len(_kept) >= MAX_KEPT:
            _kept.clear()
        _kept[key] = (identity, now, value)
    return value
