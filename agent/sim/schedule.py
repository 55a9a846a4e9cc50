"""Faults that come and go: ``from_s`` / ``until_s`` on any fault in a spec.

A fault with a window is present only while ``from_s <= t < until_s``, t being seconds
since the simulated node started (either bound may be left out). Applying a fault is a
one-way change to the hardware, so a change of the set of present faults rebuilds the
node from its healthy state with the faults present now, in place (the NVML stand-in and
the collectors hold the same SimNode object), and rewrites its filesystem tree. This runs
as a ``before_sample`` hook: between samples, never while a collector reads.

What does not restart with a rebuild: the node's epoch (counters keep counting from it)
and the live XID schedule (the listener has its own copy since it forked).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .state import counter
from .state.hardware import SimNode

WINDOW_KEYS = ("from_s", "until_s")


def window_problem(fault: Mapping[str, Any]) -> str | None:
    """Why the fault's window is unusable (for a one-line spec error), or None."""
    bounds = {}
    for key in WINDOW_KEYS:
        if key not in fault:
            continue
        value = fault[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            return f"{key} must be a number of seconds >= 0, not {value!r}"
        bounds[key] = float(value)
    if len(bounds) == 2 and bounds["until_s"] <= bounds["from_s"]:
        return f"until_s {bounds['until_s']:g} must be after from_s {bounds['from_s']:g}"
    return None


def timed(fault: Mapping[str, Any]) -> bool:
    return any(key in fault for key in WINDOW_KEYS)


def present(fault: Mapping[str, Any], elapsed_s: float) -> bool:
    return float(fault.get("from_s", 0)) <= elapsed_s < float(fault.get("until_s", float("inf")))


class Schedule:
    """The hook that keeps a node's faults in step with the clock."""

    def __init__(self, node: SimNode, faults: list[dict[str, Any]], root: Path,
                 rebuild: Callable[[list[dict[str, Any]]], SimNode],
                 write_tree: Callable[[SimNode, Path], None]) -> None:
        self.node, self.faults, self.root = node, faults, root
        self.rebuild, self.write_tree = rebuild, write_tree
        # what the node was built with (``node.build``): the faults present at its start,
        # however long ago that now is
        self.current = self._present(0.0)

    def _present(self, elapsed_s: float) -> tuple[int, ...]:
        return tuple(i for i, f in enumerate(self.faults) if present(f, elapsed_s))

    def __call__(self) -> None:
        now = self._present(counter.now() - self.node.epoch)
        if now == self.current:
            return
        fresh = self.rebuild([self.faults[i] for i in now])
        fresh.epoch, fresh.xid_schedule = self.node.epoch, self.node.xid_schedule
        vars(self.node).update(vars(fresh))
        for child in list(self.root.iterdir()):
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        self.write_tree(self.node, self.root)
        self.current = now
