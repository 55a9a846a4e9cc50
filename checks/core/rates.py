"""Counters judged as rates: growth between two samples, resets, and the ``min_events`` rule.

Error counters (ECC, PCIe replay, NVLink, InfiniBand) only grow, so a total says how old
the part is more than how sick it is; what matters is how fast a counter grows now
(docs/design.md §1). A rate check compares ``ctx.previous`` with ``ctx.snapshot``.

Two rules keep a short sample honest:

- **Reset.** A counter that went backwards was reset between the samples (driver
  reload, GPU reset, ``perfquery -R``) or wrapped. The events since the reset are at
  least ``cur``, so ``cur`` is used as a lower bound and the rate is flagged ``reset``:
  a lower bound never raises a false alarm, and a real storm still shows.
- **min_events.** Over a few seconds one or two events make an absurd rate (one event
  in 3 s is 20 a minute). A rate is only judged when at least ``min_events`` events were
  counted; below that the sample is too small to tell, whatever the rate says.

The interval is measured on the boot clock (``Snapshot.boot_clock_s``) when both samples
come from the same boot, so a wall-clock step between them (NTP) neither makes the
interval negative nor shrinks it into a false storm. A snapshot saved without the boot
clock, or one from an earlier boot, falls back to ``taken_at``, and only when that
interval is plausible:
from MIN_FALLBACK_S (the floor between two samples of ``--level full``) to MAX_FALLBACK_S.
Anything else gives no interval, never a division by a non-positive one.
"""

from __future__ import annotations

from ...agent.model.record import record
from ...agent.model.snapshot import Snapshot

DEFAULT_MIN_EVENTS = 3
# The doc of every rate check's ``min_events`` parameter (checks/core/params.py).
MIN_EVENTS_DOC = "the least increase judged as a rate (fewer is noise)"
MIN_FALLBACK_S = 1.0
MAX_FALLBACK_S = 30 * 86_400.0


@record(frozen=True)
class Rate:
    """Growth of one counter between two samples."""

    events: int  # counted between the samples (a lower bound when ``reset``)
    seconds: float
    reset: bool = False  # the counter went backwards: reset or wrapped between samples

    @property
    def per_s(self) -> float:
        return self.events / self.seconds

    @property
    def per_min(self) -> float:
        return 60.0 * self.per_s

    def judged(self, min_events: int = DEFAULT_MIN_EVENTS) -> bool:
        """Enough events were counted for the rate to mean something."""
        return self.events >= max(1, int(min_events))

    def over_per_s(self, max_per_s: float, min_events: int = DEFAULT_MIN_EVENTS) -> bool:
        """Judged, and faster than ``max_per_s``."""
        return self.judged(min_events) and self.per_s > max_per_s

    def over_per_min(self, max_per_min: float, min_events: int = DEFAULT_MIN_EVENTS) -> bool:
        """Judged, and faster than ``max_per_min``."""
        return self.judged(min_events) and self.per_min > max_per_min

    def to_dict(self) -> dict[str, float | int | bool]:
        """For a finding's ``observed``: the evidence, rounded for people."""
        return {"events": self.events, "seconds": round(self.seconds, 3),
                "per_min": round(self.per_min, 3), "reset": self.reset}


def counter_growth(prev: int | None, cur: int | None) -> tuple[int, bool] | None:
    """Events between two readings of a monotonic counter, and whether it was reset.

    None when either reading is missing. After a reset (``cur < prev``) the growth is
    ``cur``: what was counted since the reset, a lower bound.
    """
    if prev is None or cur is None:
        return None
    if cur < prev:
        return max(0, cur), True
    return cur - prev, False


def counter_rate(prev: int | None, cur: int | None, dt: float | None) -> Rate | None:
    """The :class:`Rate` of a counter read ``dt`` seconds apart; None when not computable."""
    growth = counter_growth(prev, cur)
    if growth is None or dt is None or not dt > 0:  # not dt > 0: NaN too
        return None
    events, reset = growth
    return Rate(events=events, seconds=float(dt), reset=reset)


def rate_per_s(prev: int | None, cur: int | None, dt: float | None) -> float | None:
    """Events per second between two readings ``dt`` seconds apart.

    None when a reading is missing or ``dt`` is not positive. A counter that went
    backwards was reset: the rate is then ``cur / dt``, a lower bound.
    """
    rate = counter_rate(prev, cur, dt)
    return None if rate is None else rate.per_s


def sample_interval(previous: Snapshot | None, current: Snapshot) -> float | None:
    """Seconds between two snapshots of the same node; None without a usable earlier one."""
    if previous is None:
        return None
    same_boot = previous.boot_id is not None and previous.boot_id == current.boot_id
    if same_boot and previous.boot_clock_s is not None and current.boot_clock_s is not None:
        dt = current.boot_clock_s - previous.boot_clock_s
        return dt if dt > 0 else None
    # Saved without the boot clock, or a reboot between (the counters' reset rule
    # covers that): wall-clock time, if it is plausible.
    dt = current.taken_at - previous.taken_at
    return dt if MIN_FALLBACK_S <= dt <= MAX_FALLBACK_S else None


__all__ = ["DEFAULT_MIN_EVENTS", "Rate", "counter_growth", "counter_rate", "rate_per_s",
           "sample_interval"]
