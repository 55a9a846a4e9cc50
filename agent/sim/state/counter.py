"""A simulated counter: a (base, rate per second) pair read against the node's epoch, so two
samples a few seconds apart see it grow, whichever process reads it. NVML's error counters
and the IB port counters of the simulator are both made of these.

Hardware counts events, not wall-clock seconds: the epoch and every reading are taken on
``now()``, the monotonic clock shifted by the offset between the two clocks at import
(which forked readers share), so an NTP step moves no simulated counter, as it moves no
real one. An epoch read from the wall clock instead would put it in the future after a
forward step, and every counter would read its base until the monotonic clock caught up.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

_WALL_MINUS_MONOTONIC = time.time() - time.monotonic()


def now() -> float:
    """The simulated hardware's clock: wall-clock time as at import, advancing
    monotonically (tests that fast-forward the hardware replace this)."""
    return time.monotonic() + _WALL_MINUS_MONOTONIC


@dataclass
class Counter:
    base: int = 0
    rate_per_s: float = 0.0

    def value(self, epoch: float) -> int:
        return self.base + int(self.rate_per_s * max(0.0, now() - epoch))
