"""The agent's hour of InfiniBand ``link_downed`` samples, for ``ib.error_rate``.

"Two link downs within an hour fail" needs a sample up to an hour old; the previous
snapshot is one interval (~30 s) old. Keeping every sample of the hour would be ~120 of
them, so a checkpoint is kept every ``CHECKPOINT_S`` instead (at most 13): the oldest one
not older than an hour is the window's start, ``WINDOW_S - CHECKPOINT_S`` to ``WINDOW_S``
back once the agent has run an hour. The checkpoints are saved with the other state
files, so a restart does not forget a port that flapped just before it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ...checks.ib_rates import LINK_DOWNED_HISTORY, LINK_DOWNED_WINDOW_S
from ..model import Snapshot

log = logging.getLogger("clusterdiag.agent")

IB_WINDOW = "ib_window.json"
WINDOW_S = LINK_DOWNED_WINDOW_S
CHECKPOINT_S = 300.0

Sample = dict[str, Any]  # {"taken_at": float, "counters": {"mlx5_0/1": int}}


def _counters(snap: Snapshot) -> dict[str, int]:
    return {f"{dev.name}/{port.port}": value for dev in snap.infiniband or []
            for port in dev.ports
            if isinstance(value := port.counters.get("link_downed"), int)}


def _valid(sample: Any) -> bool:
    if not isinstance(sample, dict) or not isinstance(sample.get("counters"), dict):
        return False
    taken_at = sample.get("taken_at")
    return isinstance(taken_at, (int, float)) and not isinstance(taken_at, bool) and all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
        for k, v in sample["counters"].items())


@dataclass
class IbWindow:
    node: str
    samples: list[Sample] = field(default_factory=list)  # oldest first

    def base(self, now: float) -> Sample | None:
        """The window's start for a sample taken at ``now``: the oldest checkpoint within
        the hour before it; None when there is none (``ib.error_rate`` then judges the
        previous interval only)."""
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

    def history(self, now: float) -> dict[str, Any]:
        """The entry ``ctx.history`` carries for ``ib.error_rate``; empty without a base."""
        base = self.base(now)
        return {LINK_DOWNED_HISTORY: base} if base is not None else {}

    def to_dict(self) -> dict[str, Any]:
        return {"version": 1, "node": self.node, "samples": self.samples}

    @classmethod
    def from_dict(cls, data: Any, node: str) -> IbWindow:
        """What was saved, if it is this node's and well formed; else an empty window (an
        hour of link downs unseen is a lost warning, not a reason to refuse to start)."""
        if data is None:
            return cls(node)
        samples = data.get("samples") if isinstance(data, dict) else None
        if not isinstance(samples, list) or not all(_valid(s) for s in samples):
            log.warning("state_corrupt", extra={"file": IB_WINDOW, "error": "bad samples"})
            return cls(node)
        if data.get("node") != node:
            return cls(node)
        return cls(node, sorted(samples, key=lambda s: float(s["taken_at"])))
