"""One workspace's scheduler: a heap of due times read by a bounded pool of pollers.

There is no task per tracking: ``max_in_flight`` worker coroutines each take the
earliest due entry from the heap, once the workspace's gate could let a request
out, and read it (the gate itself enforces the limits). A worker that finds
nothing due parks until a timer or a newly scheduled entry wakes it; under load
no worker ever parks, so a read costs no hand-over between tasks. While a
``Retry-After`` holds the gate, nothing is taken.

A new tracking's first read waits in a heap of its own, taken before the other:
new work is read on time even while a restart's backlog, or more work than the
pollers can read, makes every other read late. The other reads are taken in
the order they fell due, the resumed ones among them.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.engine.entry import Entry
    from orchestrator.workspace.gate import WorkspaceGate

log = logging.getLogger("orchestrator.engine")

# Wake-ups are rounded up to this: a paced workload (a resume spread at the
# rate limit, many trackings on similar delays) is read in small batches, each
# costing a turn of the loop and a write to each socket or pipe, rather than
# one of each per read. Reads are up to this much later than due, never earlier.
GRANULE_S = 0.005

Handler = Callable[["Entry", int], Awaitable[None]]
Expired = Callable[["Entry"], Awaitable[None]]


class WorkspaceScheduler:
    def __init__(
        self,
        name: str,
        gate: WorkspaceGate,
        monotonic: Callable[[], float],
        poll: Handler,
        expire: Expired,
    ) -> None:
        self.name = name
        self._mono = monotonic
        self._poll = poll
        self._expire = expire
        self._heap: list[tuple[float, int, int, Entry]] = []
        self._fresh: list[tuple[float, int, int, Entry]] = []  # new, never read yet
        self._seq = itertools.count()
        self.gate = gate
        self.max_in_flight = gate.max_in_flight
        self._idle: deque[asyncio.Future[None]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._stopping = False

    def __len__(self) -> int:
        return len(self._fresh) + len(self._heap)

    def waiting(self) -> list[Entry]:
        """The entries waiting for their read: none of them is being read (a taken
        entry leaves its heap until it is scheduled again)."""
        return [e for heap in (self._fresh, self._heap) for _, _, gen, e in heap if gen == e.gen]

    def schedule(self, entry: Entry, due: float) -> None:
        """(Re)schedule ``entry`` at monotonic ``due``; any earlier schedule is void."""
        entry.gen += 1
        entry.due = due
        heap = self._fresh if entry.polls == 0 and not entry.resumed else self._heap
        heapq.heappush(heap, (due, next(self._seq), entry.gen, entry))
        if self._idle and heap[0][3] is entry:
            # A new earliest entry: a parked worker looks again (and re-arms the timer).
            self._wake_one()

    def stop(self) -> None:
        self._stopping = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._idle:
            self._wake_one()

    def _wake_one(self) -> None:
        while self._idle:
            waiter = self._idle.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _on_timer(self) -> None:
        self._timer = None
        self._wake_one()

    def _arm(self, when: float) -> None:
        """Wake a parked worker at monotonic ``when`` (the earliest such time wins)."""
        if self._timer is not None:
            if self._timer_at <= when:
                return
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer_at = when
        # call_at uses the loop's clock; convert from ours by the current offset.
        # Rounded up to a granule: every entry due within it is read on one
        # wake-up, in one turn of the loop, rather than one wake-up per entry.
        at = loop.time() + (when - self._mono())
        self._timer = loop.call_at(math.ceil(at / GRANULE_S) * GRANULE_S, self._on_timer)

    def _due_heap(self, now: float) -> list[tuple[float, int, int, Entry]] | None:
        """The heap whose first live entry is due, new work's first; None when neither
        has one (the timer is then armed for the sooner)."""
        soonest = math.inf
        for heap in (self._fresh, self._heap):
            while heap and heap[0][2] != heap[0][3].gen:
                heapq.heappop(heap)
            if heap:
                if heap[0][0] <= now:
                    return heap
                soonest = min(soonest, heap[0][0])
        if soonest < math.inf:
            self._arm(soonest)
        return None

    def _take(self) -> tuple[Entry, int] | Entry | None:
        """The next read to make: ``(entry, gen)``; an entry whose deadline a
        Retry-After swallowed; or None when nothing may be read now (the timer is
        then armed for when something may)."""
        now = self._mono()
        while (heap := self._due_heap(now)) is not None:
            _, _, gen, entry = heap[0]
            blocked_until = self.gate.blocked_until
            if blocked_until > now:
                heapq.heappop(heap)
                if entry.deadline_mono <= now:
                    # Retry-After forbids the last read: the deadline still holds.
                    entry.gen += 1
                    return entry
                self.schedule(entry, min(blocked_until, entry.deadline_mono))
                continue
            wait = self.gate.wait_s(now)
            if wait > 0:
                self._arm(now + wait)
                return None
            heapq.heappop(heap)
            if self._idle and any(h and h[0][0] <= now for h in (self._fresh, self._heap)):
                # More is due: parked workers take it while this one reads. Two
                # each time, so that many due entries fan out over the pollers
                # in a few turns of the loop, not one turn per entry.
                self._wake_one()
                self._wake_one()
            return entry, gen
        return None

    async def worker(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            item = self._take()
            if item is None:
                waiter = loop.create_future()
                self._idle.append(waiter)
                try:
                    await waiter
                finally:
                    if not waiter.done():
                        waiter.cancel()
                continue
            if not isinstance(item, tuple):
                await self._expire(item)
                continue
            entry, gen = item
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
