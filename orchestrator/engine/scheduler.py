"""One workspace's scheduler: a heap of due times feeding a bounded pool of pollers.

There is no task per tracking: a single dispatcher sleeps until the earliest
due time, takes a token from the workspace's rate limit and hands the entry to
one of ``max_in_flight`` worker coroutines. ``Retry-After`` blocks the whole
workspace: nothing is dispatched before it passes.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from orchestrator.engine.ratelimit import TokenBucket

if TYPE_CHECKING:
    from orchestrator.engine.entry import Entry

log = logging.getLogger("orchestrator.engine")

Handler = Callable[["Entry", int], Awaitable[None]]
Expired = Callable[["Entry"], Awaitable[None]]


class WorkspaceScheduler:
    def __init__(
        self,
        name: str,
        max_in_flight: int,
        rate: float,
        monotonic: Callable[[], float],
        poll: Handler,
        expire: Expired,
    ) -> None:
        self.name = name
        self._mono = monotonic
        self._poll = poll
        self._expire = expire
        self._heap: list[tuple[float, int, int, Entry]] = []
        self._seq = itertools.count()
        # A bucket lets through its burst plus a second's refill in any one
        # second: refilling at the limit less the burst keeps every one-second
        # window within the limit, while a small burst (a fiftieth of a second's
        # worth) spares the dispatcher a timer per request.
        burst = max(1.0, rate / 50)
        self.bucket = TokenBucket(rate - (burst - 1.0), burst=burst, now=monotonic())
        self.blocked_until = 0.0
        self.max_in_flight = max_in_flight
        # A short hand-over queue: reads wait in the heap, where a Retry-After
        # or a reschedule still reaches them, rather than in the queue.
        self._queue: asyncio.Queue[tuple[Entry, int] | None] = asyncio.Queue(
            max(1, max_in_flight // 8)
        )
        self._wake = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._stopping = False
        self.in_flight = 0

    def in_flight_now(self) -> float:
        return float(self.in_flight)

    def __len__(self) -> int:
        return len(self._heap)

    def schedule(self, entry: Entry, due: float) -> None:
        """(Re)schedule ``entry`` at monotonic ``due``; any earlier schedule is void."""
        entry.gen += 1
        entry.due = due
        heapq.heappush(self._heap, (due, next(self._seq), entry.gen, entry))
        if self._heap[0][3] is entry:
            self._wake.set()

    def block(self, until: float) -> None:
        if until > self.blocked_until:
            self.blocked_until = until

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    def _sleep_until(self, when: float) -> None:
        loop = asyncio.get_running_loop()
        if self._timer is not None:
            self._timer.cancel()
        # call_at uses the loop's clock; convert from ours by the current offset.
        self._timer = loop.call_at(loop.time() + (when - self._mono()), self._wake.set)

    async def dispatch(self) -> None:
        heap = self._heap
        while not self._stopping:
            if not heap:
                self._wake.clear()
                await self._wake.wait()
                continue
            due, _, gen, entry = heap[0]
            if gen != entry.gen:
                heapq.heappop(heap)
                continue
            now = self._mono()
            if due > now:
                self._wake.clear()
                self._sleep_until(due)
                await self._wake.wait()
                continue
            if self.blocked_until > now:
                heapq.heappop(heap)
                if entry.deadline_mono <= now:
                    # Retry-After forbids the last read: the deadline still holds.
                    entry.gen += 1
                    await self._expire(entry)
                else:
                    self.schedule(entry, min(self.blocked_until, entry.deadline_mono))
                continue
            wait = self.bucket.take(now)
            if wait > 0:
                self._wake.clear()
                self._sleep_until(now + wait)
                await self._wake.wait()
                continue
            heapq.heappop(heap)
            await self._queue.put((entry, gen))
        # Reads handed over but not started yet are dropped: they stay active in
        # the store and are resumed on the next start.
        while not self._queue.empty():
            self._queue.get_nowait()
        for _ in range(self.max_in_flight):
            await self._queue.put(None)

    async def worker(self) -> None:
        queue = self._queue
        while True:
            item = await queue.get()
            if item is None:
                return
            entry, gen = item
            if gen != entry.gen:
                continue
            if self.blocked_until > self._mono():
                # A Retry-After arrived after this read was handed over: it waits
                # too (the dispatcher ends it if its deadline passes meanwhile).
                self.schedule(entry, min(self.blocked_until, entry.deadline_mono))
                continue
            self.in_flight += 1
            try:
                await self._poll(entry, gen)
            except Exception:
                # One tracking's bad luck must not stop the workspace's pollers;
                # it is logged with its id and read again later.
                log.exception(
                    "poll failed unexpectedly",
                    extra={"fields": {"tracking_id": entry.tracking_id, "workspace": self.name}},
                )
                if gen == entry.gen:
                    self.schedule(entry, self._mono() + 30.0)
            finally:
                self.in_flight -= 1
