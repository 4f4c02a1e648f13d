"""Small asyncio helpers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


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
