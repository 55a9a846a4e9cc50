"""The agent's command runner: answers that change only by someone's hand, kept a while.

Every interval a collection asks ``systemctl show`` about the required units,
``timedatectl`` (else ``chronyc``, ``ntpq``) about the clock, and ``dcb`` (else
``mlnx_qos``) twice about each RoCE netdev: on a dgx-h100 ~10 processes and ~25-30 ms of
CPU a cycle, most of what the agent costs a node between collections. The
clock's and the ports' answers change when the time daemon loses its sources or someone
reconfigures a port's PFC or trust, so the agent keeps them for ``agent.keep_s`` (120 s)
and asks again after that. ``systemctl`` is asked every collection: a Fabric Manager or
IMEX unit that dies must reach the report within one interval, because the prolog judges
a node by a report up to two intervals old (one process, ~5 ms of CPU a cycle).

Staleness, bounded: an answer is used while it is younger than ``keep_s``,
counted from when it was asked; the first collection after that asks again. So a clock
that loses sync or a changed PFC setting reaches the agent's report within ``keep_s``
plus one interval (150 s at the defaults); ``keep_s: 0`` asks every time. Files are read
every collection, but for what is fixed while a device exists (collectors/kept.py, for as
long).

What is kept: the answer of one of ``KEPT_PROGRAMS`` that ran and exited, whatever its
status (a netdev that does not do DCB says so again), by its exact argv; never a command
that timed out or could not be started (retried at the next collection), never another
program (``all_reduce_perf`` prints a measurement). At most ``MAX_KEPT`` answers, the
least recently used dropped first. Only the agent keeps answers: ``run``, ``snapshot``,
the prolog and the other one-shot paths ask every time, and so does the agent on
``--simulate``, whose commands are answered in-process from the simulated state.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from ..read.sources import CommandResult, CommandRunner

KEPT_PROGRAMS = frozenset({"timedatectl", "chronyc", "ntpq", "dcb", "mlnx_qos"})
MAX_KEPT = 256  # a node asks ~20 questions: the clock, two per netdev


class KeptRunner:
    """``inner`` with the answers of ``KEPT_PROGRAMS`` kept for ``keep_s`` seconds (the
    agent sets ``keep_s`` again on a config reload). Callable from several threads at
    once: the RoCE netdevs are asked side by side."""

    def __init__(self, inner: CommandRunner, keep_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.inner = inner
        self.keep_s = keep_s
        self._clock = clock
        self._kept: OrderedDict[tuple[str, ...], tuple[float, CommandResult]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, argv: list[str], timeout_s: float) -> CommandResult:
        if self.keep_s <= 0 or os.path.basename(argv[0]) not in KEPT_PROGRAMS:
            return self.inner(argv, timeout_s)
        key = tuple(argv)
        asked = self._clock()
        with self._lock:
            hit = self._kept.get(key)
            if hit is not None and asked - hit[0] < self.keep_s:
                self._kept.move_to_end(key)
                return hit[1]
        result = self.inner(argv, timeout_s)
        with self._lock:
            if result.returncode is None:  # timed out or never started: ask again next time
                self._kept.pop(key, None)
                return result
            self._kept[key] = (asked, result)
            self._kept.move_to_end(key)
            while len(self._kept) > MAX_KEPT:
                self._kept.popitem(last=False)
        return result
