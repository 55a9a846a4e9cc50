"""Asking many nodes, a bounded number at a time, and stopping at one deadline.

``concurrency`` workers take the nodes in order from one shared iterator; a worker does not
start a node once the deadline has passed, and whatever is still in flight then is
cancelled. The nodes never started are known by index and reported as not reached.

Only ``concurrency`` tasks ever exist, never one task per node waiting on a semaphore:
cancelling such waiters at the deadline removes each from the semaphore's waiter deque
(CPython Lib/asyncio/locks.py, ``Semaphore.acquire``: ``self._waiters.remove(fut)``), a
linear search each, quadratic in all, enough to hold 100,000 nodes' gather past its
deadline, and every waiting task holds its coroutine's memory.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

R = TypeVar("R")


@dataclass
class Pooled(Generic[R]):
    """Each node's result by index; ``late`` the indexes in flight at the deadline, and
    the indexes that are neither (None in ``results``, not in ``late``) were never started."""

    results: list[R | None]
    late: set[int]


async def within_deadline(count: int, work: Callable[[int], Awaitable[R]], concurrency: int,
                          deadline_s: float, clock: Callable[[], float] = time.monotonic
                          ) -> Pooled[R]:
    """``work(i)`` for i in ``range(count)``, at most ``concurrency`` at once, none started
    after ``deadline_s`` by ``clock`` and none left running past it."""
    until = clock() + deadline_s
    pooled: Pooled[R] = Pooled([None] * count, set())
    indexes = iter(range(count))
    working: list[int] = []  # each worker's current index, by the worker's slot

    async def worker(slot: int) -> None:
        for index in indexes:  # one iterator for all: each index is taken once
            if clock() >= until:
                return
            working[slot] = index
            pooled.results[index] = await work(index)

    slots = range(min(concurrency, count))
    working.extend(-1 for _ in slots)
    workers = {asyncio.ensure_future(worker(slot)): slot for slot in slots}
    if not workers:
        return pooled
    # Woken when a worker ends (it ran out of nodes, or found the deadline passed) or at
    # the deadline; only ``concurrency`` wake-ups in all.
    late: set[asyncio.Task[None]] = set(workers)
    while late and (left := until - clock()) > 0:
        _, late = await asyncio.wait(late, timeout=left, return_when=asyncio.FIRST_COMPLETED)
    for task in late:
        task.cancel()
        pooled.late.add(working[workers[task]])
    await asyncio.gather(*late, return_exceptions=True)
    for task in workers:
        if task not in late:
            task.result()  # a worker's own exception is a bug: raised, never swallowed
    return pooled
