"""The handler deadline: a slow handler ends in TimeoutError, a quick one keeps its result,
and a cancel from outside stays a cancel (on 3.10 this is our own timer, not asyncio's)."""

from __future__ import annotations

import asyncio

import pytest

from clusterdiag.agent.daemon.deadline import deadline


async def _guarded(delay: float, limit: float) -> str:
    async with deadline(limit):
        await asyncio.sleep(delay)
        return "done"


def test_slow_handler_times_out() -> None:
    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(_guarded(1.0, 0.05))


def test_quick_handler_keeps_its_result() -> None:
    assert asyncio.run(_guarded(0.0, 1.0)) == "done"


def test_outside_cancel_is_not_a_timeout() -> None:
    async def main() -> None:
        task = asyncio.create_task(_guarded(1.0, 5.0))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
