"""The agent's long window of event counters: growth over the last hour, not one interval.

Samples ~30 s apart cannot see a trickle: a link that recovers once every few minutes,
or flaps twice in an hour, never shows ``min_events`` in one interval, so a rate check
fed only the previous sample passes it forever (the pattern that preceded an
``Xid 149 NETIR_LINK_DOWN`` on a real GB200 cluster). The agent keeps checkpoints of the
event counters that trickle (agent/daemon/counterwindow.py, saved across restarts) and
hands the oldest one within ``WINDOW_S`` to the checks as ``ctx.history.counter_window``:
``{"taken_at": float, "counters": {component: {counter name: int}}}``, components as the
checks name them (``mlx5_0/1``, ``gpu3.link7``). ``ib.error_rate`` and
``nvlink.error_rate`` judge those counters' growth since it, with their usual rules; a
one-shot run has no window and judges its interval, as before.

The history is the agent's own state file: malformed, too old, or newer than the
previous sample, it is ignored (the interval is judged), never trusted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .rates import Rate, counter_rate, sample_interval
from .registry import CheckContext

WINDOW_S = 3600.0
# The counters the agent keeps, by family (names as the snapshot has them).
IB_WINDOW_COUNTERS = ("link_downed", "link_error_recovery")
NVLINK_WINDOW_COUNTERS = ("replay", "recovery", "recovery_failed")


@dataclass(frozen=True)
class WindowBase:
    """The window's start: when it was taken and the counters then."""

    taken_at: float
    seconds: float  # from the start to the snapshot being judged
    counters: Mapping[str, Mapping[str, int]]

    def rate(self, component: str, name: str, current: int | None) -> Rate | None:
        """Growth of one counter since the window's start; None when it was not kept."""
        old = self.counters.get(component, {}).get(name)
        return counter_rate(old, current, self.seconds) if old is not None else None


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def window_base(ctx: CheckContext) -> WindowBase | None:
    """The usable window start in ``ctx.history``, or None (judge the interval only).

    Usable: well formed, within ``WINDOW_S`` of the snapshot, and not newer than the
    previous sample (a window shorter than the interval would judge less, not more).
    """
    base = ctx.history.counter_window
    if not isinstance(base, Mapping):
        return None
    taken_at, counters = base.get("taken_at"), base.get("counters")
    if not isinstance(taken_at, (int, float)) or isinstance(taken_at, bool) \
            or not isinstance(counters, Mapping):
        return None
    seconds = ctx.snapshot.taken_at - float(taken_at)
    shortest = sample_interval(ctx.previous, ctx.snapshot) or 0.0
    if seconds <= 0 or not shortest <= seconds <= WINDOW_S:
        return None
    clean = {comp: {n: v for n, v in values.items() if isinstance(n, str) and _int(v)}
             for comp, values in counters.items()
             if isinstance(comp, str) and isinstance(values, Mapping)}
    return WindowBase(float(taken_at), seconds, clean)


__all__ = ["IB_WINDOW_COUNTERS", "NVLINK_WINDOW_COUNTERS", "WINDOW_S",
           "WindowBase", "window_base"]
