"""The book of entries: every tracking this process polls, and when each is read.

The ``Book`` is the only code that creates, schedules, voids and removes an
entry. The engine, the finisher and the replica use its domain operations
(``adopt``, ``first_read``, ``schedule``, ``finish``, ``reinstate``, ``drop``,
``hand_back``, ``drop_all``). Each entry carries a ticket that only this module
reads or moves: scheduling an entry again, or taking it out, moves it, so a slot
in a heap or a read in flight holding an older ticket is void.

Each workspace has a ``WorkspaceScheduler``: a heap of due times read by a
bounded pool of pollers. There is no task per tracking: ``max_in_flight``
worker coroutines each take the earliest due entry, once the workspace's gate
could let a request out, and read it (the gate itself enforces the limits). A
worker that finds nothing due parks until a timer or a newly scheduled entry
wakes it; under load no worker ever parks, so a read costs no hand-over between
tasks. While a ``Retry-After`` holds the gate, nothing is taken.

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
import random
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from orchestrator.engine.entry import Entry
from orchestrator.engine.resume_plan import ResumePlan
from orchestrator.vocabulary import NextPollReason

if TYPE_CHECKING:
    from orchestrator.engine.poll_metrics import PollMetrics
    from orchestrator.kinds.base import KindHandler
    from orchestrator.store.base import Tracking
    from orchestrator.workspace.client import WorkspaceClient
    from orchestrator.workspace.gate import WorkspaceGate

log = logging.getLogger("orchestrator.engine")
_FIRST_READ = NextPollReason.FIRST_READ

# Wake-ups are rounded up to this: a paced workload (a resume spread at the
# rate limit, many trackings on similar delays) is read in small batches, each
# costing a turn of the loop and a write to each socket or pipe, rather than
# one of each per read. Reads are up to this much later than due, never earlier.
GRANULE_S = 0.005

# A poll is given the entry and its ticket: ``Book.holds`` says whether it still
# holds the entry once its reads are back.
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
        return [
            e
            for heap in (self._fresh, self._heap)
            for _, _, ticket, e in heap
            if ticket == e.ticket
        ]

    def schedule(self, entry: Entry, due: float) -> None:
        """(Re)schedule ``entry`` at monotonic ``due``; any earlier schedule is void."""
        entry.ticket += 1
        entry.due = due
        heap = self._fresh if entry.state.polls == 0 and not entry.resumed else self._heap
        heapq.heappush(heap, (due, next(self._seq), entry.ticket, entry))
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
        rounded = math.ceil(at / GRANULE_S) * GRANULE_S
        # The product can round below ``at`` (80.3 for 80.30000000000001): a timer that
        # fires before what it waits for would be armed again and again at once.
        self._timer = loop.call_at(
            rounded if rounded >= at else rounded + GRANULE_S, self._on_timer
        )

    def _due_heap(self, now: float) -> list[tuple[float, int, int, Entry]] | None:
        """The heap whose first live entry is due, new work's first; None when neither
        has one (the timer is then armed for the sooner)."""
        soonest = math.inf
        for heap in (self._fresh, self._heap):
            while heap and heap[0][2] != heap[0][3].ticket:
                heapq.heappop(heap)
            if heap:
                if heap[0][0] <= now:
                    return heap
                soonest = min(soonest, heap[0][0])
        if soonest < math.inf:
            self._arm(soonest)
        return None

    def _take(self) -> tuple[Entry, int] | Entry | None:
        """The next read to make: ``(entry, ticket)``; an entry whose deadline a
        Retry-After swallowed; or None when nothing may be read now (the timer is
        then armed for when something may)."""
        now = self._mono()
        while (heap := self._due_heap(now)) is not None:
            _, _, ticket, entry = heap[0]
            blocked_until = self.gate.blocked_until
            if blocked_until > now:
                heapq.heappop(heap)
                if entry.state.deadline_mono <= now:
                    # Retry-After forbids the last read: the deadline still holds.
                    entry.ticket += 1
                    return entry
                self.schedule(entry, min(blocked_until, entry.state.deadline_mono))
                continue
            wait = self.gate.wait_s(now)
            if wait > 0:
                self._arm(now + wait)
                return None
            heapq.heappop(heap)
            if self._idle and self._due_heap(now) is not None:
                # More is due: parked workers take it while this one reads. Two
                # each time, so that many due entries fan out over the pollers
                # in a few turns of the loop, not one turn per entry.
                self._wake_one()
                self._wake_one()
            # (Else the timer is armed for what is due next: this worker may be
            # gone for as long as its read takes.)
            return entry, ticket
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
            entry, ticket = item
            try:
                await self._poll(entry, ticket)
            except Exception:
                # One tracking's bad luck must not stop the workspace's pollers;
                # it is logged with its id and read again later.
                log.exception(
                    "poll failed unexpectedly",
                    extra={"fields": {"tracking_id": entry.tracking_id, "workspace": self.name}},
                )
                if ticket == entry.ticket:
                    self.schedule(entry, self._mono() + 30.0)


class Book:
    """Every entry this process holds, and each workspace's schedule of them."""

    def __init__(
        self,
        clients: Mapping[str, WorkspaceClient],
        handlers: Mapping[str, KindHandler],
        monotonic: Callable[[], float],
        poll_metrics: PollMetrics,
        poll: Handler,
        expire: Expired,
    ) -> None:
        self.entries: dict[str, Entry] = {}
        self._held: Counter[str] = Counter()  # entries by workspace
        self.epoch = 0  # how many times every entry was dropped (the leases given up)
        self._clients, self._handlers, self._mono = clients, handlers, monotonic
        self._poll_metrics = poll_metrics  # trackings_active: what the book holds
        self.schedulers = {
            name: WorkspaceScheduler(name, client.gate, monotonic, poll, expire)
            for name, client in clients.items()
        }
        self.pending = poll_metrics.pending  # resumed trackings not read yet

    # -- taking work on ---------------------------------------------------------------

    def adopt(
        self,
        t: Tracking,
        to_mono: float,
        work_class: str | None = None,
        resumed_delay: float | None = None,
    ) -> tuple[Entry, float] | None:
        """A new entry for active tracking ``t`` (new, resumed or claimed), not yet
        scheduled, and the earliest time (monotonic) to read it; None if held already.

        ``to_mono`` turns wall-clock times into monotonic ones (monotonic minus wall);
        ``work_class`` is the intake's hint of the work's class; ``resumed_delay``, the
        delay a resumed one's backoff goes on from (as ``first_read`` will be given).
        """
        if t.tracking_id in self.entries or t.state != "active":
            return None
        adopted = self._handlers[t.kind].adopt(t, self._clients[t.workspace])
        entry = Entry(
            t,
            t.deadline_at + to_mono,
            work_class,
            adopted.fingerprint,
            adopted.digest,
            resumed_delay,
        )
        entry.kind_state = adopted.state
        self._add(entry)
        not_before = adopted.not_before
        return entry, 0.0 if not_before is None else not_before + to_mono

    def resume(
        self,
        page: Sequence[Tracking],
        plans: Mapping[str, ResumePlan],
        start: float,
        to_mono: float,
        rng: random.Random,
    ) -> None:
        """``adopt`` and ``first_read`` for a page of resumed trackings, in bulk (a restart
        takes a million): each first read where its workspace's plan places it, counted
        from monotonic ``start``."""
        entries, handlers, clients, pending = (
            self.entries,
            self._handlers,
            self._clients,
            self.pending,
        )
        held: Counter[tuple[str, str]] = Counter()
        for t in page:
            plan = plans.get(t.workspace)
            if plan is None:
                log.error(
                    "tracking of an unconfigured workspace left as is",
                    extra={"fields": {"tracking_id": t.tracking_id, "workspace": t.workspace}},
                )
                continue
            if t.tracking_id in entries or t.state != "active":
                continue  # held already: taken by intake while loading
            adopted = handlers[t.kind].adopt(t, clients[t.workspace])
            entry = Entry(
                t, t.deadline_at + to_mono, None, adopted.fingerprint, adopted.digest, plan.seeded
            )
            entry.kind_state = adopted.state
            entry.resumed = True
            entries[t.tracking_id] = entry
            held[entry.workspace, entry.kind] += 1
            if plan.placed >= plan.count:  # more than counted: spread past the window
                pending.add(entry.workspace, 1)
            due = start + plan.place(rng)
            not_before = adopted.not_before
            if not_before is not None and not_before + to_mono > due:
                due = not_before + to_mono
            self.schedule(entry, due, _FIRST_READ)
        for (workspace, kind), n in held.items():
            self._held[workspace] += n
            self._poll_metrics.held(workspace, kind, n)

    def first_read(
        self, entry: Entry, due: float, reason: NextPollReason, *, resumed_delay: float | None
    ) -> None:
        """Schedule an adopted entry's first read (``resumed_delay``: the delay a resumed
        one's backoff goes on from; None for new work)."""
        if resumed_delay is not None:
            entry.resumed = True
            if entry.state.delay != resumed_delay:
                entry.state = entry.state._replace(delay=resumed_delay)
        self.schedule(entry, due, reason)

    def first_read_done(self, entry: Entry) -> None:
        """A poll of it begins: a resumed entry is no longer waiting for its first read."""
        if entry.resumed:
            entry.resumed = False
            self.pending.add(entry.workspace, -1)

    # -- scheduling -------------------------------------------------------------------

    def schedule(self, entry: Entry, due: float, reason: NextPollReason) -> None:
        """Read ``entry`` next at monotonic ``due`` (never past its deadline), for ``reason``."""
        entry.reason = reason
        deadline = entry.state.deadline_mono
        self.schedulers[entry.workspace].schedule(entry, due if due < deadline else deadline)

    def holds(self, entry: Entry, ticket: int) -> bool:
        """Whether a poll given ``ticket`` still holds ``entry`` (not ended, dropped or
        scheduled again while its reads were in flight)."""
        return ticket == entry.ticket

    def ticket(self, entry: Entry) -> int:
        return entry.ticket

    # -- letting go -------------------------------------------------------------------

    def finish(self, entry: Entry) -> None:
        """It is ending: out of the book, its schedule and any read in flight void."""
        self._remove(entry)

    def reinstate(self, entry: Entry, due: float, epoch: int) -> None:
        """Its terminal write, begun at ``epoch``, failed (nothing was committed): read it
        again at ``due``; a passed deadline ends it on that read. Not when every entry
        was dropped since (the leases given up): its work is a peer's to take now."""
        if entry.tracking_id in self.entries or epoch != self.epoch:
            return
        self._add(entry)
        deadline_mono = max(entry.state.deadline_mono, due)
        entry.state = entry.state._replace(deadline_mono=deadline_mono)
        self.schedule(entry, due, entry.reason)

    def drop(self, tracking_id: str) -> Entry | None:
        """Forget a tracking another replica may hold now: no write, no remote call."""
        entry = self.entries.get(tracking_id)
        if entry is not None:
            self._remove(entry)
        return entry

    def hand_back(self, n: int) -> list[Entry]:
        """Drop up to ``n`` entries, those due last and none mid-read, and return them."""
        waiting = [e for s in self.schedulers.values() for e in s.waiting()]
        chosen = sorted(waiting, key=lambda e: e.due, reverse=True)[:n]
        for entry in chosen:
            self._remove(entry)
        return chosen

    def drop_all(self) -> list[Entry]:
        self.epoch += 1
        dropped = list(self.entries.values())
        for entry in dropped:
            self._remove(entry)
        return dropped

    def held(self, workspace: str) -> int:
        """How many entries of ``workspace`` the book holds (with replicas: its leases)."""
        return self._held[workspace]

    def _add(self, entry: Entry) -> None:
        self.entries[entry.tracking_id] = entry
        self._held[entry.workspace] += 1
        self._poll_metrics.held(entry.workspace, entry.kind, 1)

    def _remove(self, entry: Entry) -> None:
        if self.entries.pop(entry.tracking_id, None) is None:
            return
        self._held[entry.workspace] -= 1
        self._poll_metrics.held(entry.workspace, entry.kind, -1)
        self.first_read_done(entry)  # ended (abandoned, expired) before its first read
        entry.ticket += 1
