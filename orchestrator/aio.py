"""Small asyncio helpers."""

from __future__ import annotations

import asyncio


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
