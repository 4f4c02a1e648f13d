"""Small asyncio helpers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

# Calls given up on by ``bounded``, until their cleanup ends.
_abandoned: set[asyncio.Task[Any]] = set()


async def wait_event(event: asyncio.Event, wait_s: float) -> bool:
    """Wait for ``event`` at most ``wait_s`` seconds; True when it was set.

    Python 3.11's ``asyncio.wait_for`` can swallow a cancellation that arrives
    just as the awaited event fires (fixed in 3.12), which left a cancelled task
    waiting for its next timeout: a shutdown stalled for a whole minute.
    ``asyncio.timeout`` has no such race.
    """
    try:
        async with asyncio.timeout(wait_s):
            await event.wait()
    except TimeoutError:
        return False
    return True


async def bounded(call: Coroutine[Any, Any, T], seconds: float) -> T:
    """``call``'s result, or TimeoutError after ``seconds`` however long its
    cleanup takes.

    ``asyncio.timeout`` alone waits for the cleanup of what it cancels: a database
    call cancelled on a hung link waits for a cancel request that never gets
    through (asyncpg hands its connection back shielded), so a bounded probe or
    renewal stayed open as long as the link hung. The call given up on is
    cancelled and ends in the background.
    """
    task = asyncio.ensure_future(call)
    try:
        async with asyncio.timeout(seconds):
            return await asyncio.shield(task)
    except BaseException:
        if not task.done():
            task.cancel()
            _abandoned.add(task)
            task.add_done_callback(_forget)
        raise


def _forget(task: asyncio.Task[Any]) -> None:
    _abandoned.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: it was given up on, not lost


def run_async(main: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run on uvloop where it is installed: it roughly halves the CPU per poll."""
    factory = None
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        pass
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main())
