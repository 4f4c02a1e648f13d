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
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

from orchestrator.aio import wait_event

if TYPE_CHECKING:
    from orchestrator.metrics import Metrics
    from orchestrator.store.groups import GroupEnd

T = TypeVar("T")
# How often a wait looks whether its caller is still there (aiohttp does not cancel a
# handler whose client left).
GONE_CHECK_S = 0.5


def group_key(name: str) -> str:
    """A group's key among the waits, apart from every tracking id (``trk_...``)."""
    return f"group:{name}"


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


async def wait_for_end(
    ends: Ends,
    key: str,
    read: Callable[[], Awaitable[T]],
    ended: Callable[[T], bool],
    wait_s: float,
    gone: Callable[[], bool],
) -> T:
    """``read()`` once ``ended`` says so, or after ``wait_s`` as it is then.

    Woken by ``Ends`` (read again then), never by reading on a timer; ``gone`` (the
    caller left, the service drains) is looked at every ``GONE_CHECK_S`` so that a
    wait nobody reads ends soon.
    """
    loop = asyncio.get_running_loop()
    until = loop.time() + wait_s
    with ends.watch(key) as woken:
        # Registered before the read: an end committed during it still wakes us.
        value = await read()
        while not ended(value):
            left = until - loop.time()
            if left <= 0 or gone():
                break
            if await wait_event(woken, min(left, GONE_CHECK_S)) or left <= GONE_CHECK_S:
                woken.clear()
                value = await read()
    return value


class GroupMetrics:
    """Each group end this process decides, observed once: the store may build a
    group's event twice when a batched write is run again after a failure."""

    SEEN = 10_000  # group names remembered against a second count

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._seen: dict[str, None] = {}

    def __call__(self, end: GroupEnd) -> None:
        g = end.group
        if g.name in self._seen:
            return
        self._seen[g.name] = None
        if len(self._seen) > self.SEEN:
            del self._seen[next(iter(self._seen))]
        outcome = g.outcome or "completed"
        ended_at = g.ended_at if g.ended_at is not None else g.created_at
        self._metrics.group_duration_seconds.labels(outcome=outcome).observe(
            max(0.0, ended_at - g.created_at)
        )
        self._metrics.group_members.labels(outcome=outcome).observe(g.members)
