"""A simulated counter: a (base, rate per second) pair read against the node's epoch, so two
samples a few seconds apart see it grow, whichever process reads it. NVML's error counters
and the IB port counters of the simulator are both made of these."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class Counter:
    base: int = 0
    rate_per_s: float = 0.0

    def value(self, epoch: float) -> int:
        return self.base + int(self.rate_per_s * max(0.0, time.time() - epoch))
