"""Wake-ups for the callers of a server-side wait (``?wait=S``).

A caller waiting for a tracking to end registers before it reads the store;
the finisher calls ``ended`` once a terminal write has committed, and on a
shared store the replica calls ``wake`` when another replica's events are
announced (LISTEN/NOTIFY), for the keys this process does not hold. A woken
caller reads the store again: a wake-up carries no data, so one too many costs
a read and one missed costs at most the wait's bound, never a wrong answer.
Nothing is kept for a key nobody waits on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Ends:
    def __init__(self) -> None:
        self._waiting: dict[str, set[asyncio.Event]] = {}
        self._count = 0

    @property
    def waiting(self) -> int:
        """Callers waiting now (the ``orchestrator_api_waits`` gauge)."""
        return self._count

    @contextmanager
    def watch(self, key: str) -> Iterator[asyncio.Event]:
        """An event ``ended(key)`` or ``wake`` sets; registered until the block ends."""
        event = asyncio.Event()
        events = self._waiting.setdefault(key, set())
        events.add(event)
        self._count += 1
        try:
            yield event
        finally:
            self._count -= 1
            events.discard(event)
            if not events:
                self._waiting.pop(key, None)

    def ended(self, key: str) -> None:
        for event in self._waiting.get(key, ()):
            event.set()

    def wake(self, which: Callable[[str], bool]) -> None:
        """Wake every waiter whose key ``which`` selects (another replica's news)."""
        for key, events in self._waiting.items():
            if which(key):
                for event in events:
                    event.set()
