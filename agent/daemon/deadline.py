"""A deadline for one awaited handler that costs no extra task.

``asyncio.wait_for`` wraps the awaitable in a new task before Python 3.12; under a few
hundred clients that doubled each request's cost and filled the server's slots (503s in the
200-client load test). 3.11 has ``asyncio.timeout``; 3.10 (DGX OS 6's Python) gets the same
idea from a timer that cancels the current task, turned back into ``TimeoutError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator

if sys.version_info >= (3, 11):
    deadline = asyncio.timeout
else:
    @contextlib.asynccontextmanager
    async def deadline(seconds: float) -> AsyncIterator[None]:
        task = asyncio.current_task()
        assert task is not None, "deadline() needs a running task"
        loop = asyncio.get_running_loop()
        fired = False

        def expire() -> None:
            nonlocal fired
            fired = True
            task.cancel()

        handle = loop.call_later(seconds, expire)
        try:
            yield
        except asyncio.CancelledError as exc:
            if fired:
                raise asyncio.TimeoutError from exc
            raise
        finally:
            handle.cancel()
