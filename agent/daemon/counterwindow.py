"""The agent's hour of event-counter checkpoints, for checks/core/window.py.

"Two link downs within an hour fail" and "three NVLink recoveries in an hour fail" need a
sample up to an hour old; the previous snapshot is one interval (~30 s) old. Keeping
every sample of the hour would be ~120 of them, so a checkpoint is kept every
``CHECKPOINT_S`` instead (at most 13): the oldest one not older than an hour is the
window's start, ``WINDOW_S - CHECKPOINT_S`` to ``WINDOW_S`` back once the agent has run
an hour. A checkpoint holds the counters that trickle (``IB_WINDOW_COUNTERS`` of every
InfiniBand port, ``NVLINK_WINDOW_COUNTERS`` of every NVLink), by the components the
checks name. The checkpoints are saved with the other state files, so a restart does
not forget a port that flapped just before it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ...checks.core.registry import History
from ...checks.core.window import (
    IB_WINDOW_COUNTERS,
    NVLINK_WINDOW_COUNTERS,
    WINDOW_S,
)
from ..model import Snapshot

log = logging.getLogger("clusterdiag.agent")

COUNTER_WINDOW_FILE = "counter_window.json"
CHECKPOINT_S = 300.0

# {"taken_at": float, "counters": {"mlx5_0/1": {"link_downed": int}, "gpu3.link7": {...}}}
Sample = dict[str, Any]


def _counters(snap: Snapshot) -> dict[str, dict[str, int]]:
    found: dict[str, dict[str, int]] = {}
    for dev in snap.infiniband or []:
        for port in dev.ports:
            values = {n: v for n in IB_WINDOW_COUNTERS
                      if isinstance(v := port.counters.get(n), int)}
            if values:
                found[f"{dev.name}/{port.port}"] = values
    for gpu in snap.nvml.gpus if snap.nvml is not None else []:
        for link in gpu.nvlinks:
            values = {n: v for n in NVLINK_WINDOW_COUNTERS
                      if isinstance(v := link.errors.get(n), int)}
            if values:
                found[f"gpu{gpu.index}.link{link.link}"] = values
    return found


def _number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _valid(sample: Any) -> bool:
    if not isinstance(sample, dict) or not isinstance(sample.get("counters"), dict):
        return False
    taken_at = sample.get("taken_at")
    return isinstance(taken_at, (int, float)) and not isinstance(taken_at, bool) and all(
        isinstance(comp, str) and isinstance(values, dict)
        and all(isinstance(k, str) and _number(v) for k, v in values.items())
        for comp, values in sample["counters"].items())


@dataclass
class CounterWindow:
    node: str
    samples: list[Sample] = field(default_factory=list)  # oldest first

    def base(self, now: float) -> Sample | None:
        """The window's start for a sample taken at ``now``: the oldest checkpoint within
        the hour before it; None when there is none (the checks then judge the previous
        interval only)."""
        return next((s for s in self.samples if 0 < now - s["taken_at"] <= WINDOW_S), None)

    def add(self, snap: Snapshot) -> bool:
        """Roll forward with a new sample; True when the checkpoints changed (save them)."""
        now = snap.taken_at
        kept = [s for s in self.samples if 0 < now - s["taken_at"] <= WINDOW_S]
        changed = len(kept) != len(self.samples)
        counters = _counters(snap)
        if counters and (not kept or now - kept[-1]["taken_at"] >= CHECKPOINT_S):
            kept.append({"taken_at": now, "counters": counters})
            changed = True
        self.samples = kept
        return changed

    def history(self, now: float) -> History:
        """What ``ctx.history`` carries for the rate checks: no window without a base."""
        return History(counter_window=self.base(now))

    def to_dict(self) -> dict[str, Any]:
        return {"version": 2, "node": self.node, "samples": self.samples}

    @classmethod
    def from_dict(cls, data: Any, node: str) -> CounterWindow:
        """What was saved, if it is this node's and well formed; else an empty window (an
        hour of link downs unseen is a lost warning, not a reason to refuse to start)."""
        if data is None:
            return cls(node)
        samples = data.get("samples") if isinstance(data, dict) else None
        if not isinstance(samples, list) or not all(_valid(s) for s in samples):
            log.warning("state_corrupt", extra={"file": COUNTER_WINDOW_FILE,
                                                "error": "bad samples"})
            return cls(node)
        if data.get("node") != node:
            return cls(node)
        return cls(node, sorted(samples, key=lambda s: float(s["taken_at"])))
