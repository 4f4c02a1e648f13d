"""The engine's write path: poll results buffered into group commits.

A poll result is not acknowledged to anyone, so it need not be durable before
the next poll: buffering them turns thousands of polls per second into a few
transactions. Terminal transitions are written through ``finish`` after the
buffer is flushed, so a tracking's status_changed events always precede its
terminal event in the log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from orchestrator.aio import wait_event
from orchestrator.engine.entry import Entry
from orchestrator.errors import StoreError
from orchestrator.events.bus import EventBus
from orchestrator.store.base import Finish, PollUpdate, Store

log = logging.getLogger("orchestrator.engine")


class PollWriter:
    def __init__(self, store: Store, bus: EventBus, interval_s: float, max_batch: int) -> None:
        self._store = store
        self._bus = bus
        self._interval = max(interval_s, 0.001)
        self._max_batch = max_batch
        self._pending: list[PollUpdate] = []
        self._kick = asyncio.Event()
        self._lock = asyncio.Lock()
        self._finishing: list[tuple[list[Finish], asyncio.Future[list[bool]]]] = []

    def add(self, update: PollUpdate) -> None:
        self._pending.append(update)
        if len(self._pending) >= self._max_batch:
            self._kick.set()

    @property
    def backlog(self) -> int:
        return len(self._pending)

    async def flush(self) -> None:
        """Write everything buffered so far; returns after the commit."""
        # The lock keeps batches in the order they were taken, so a later
        # update of a tracking never overtakes an earlier one.
        async with self._lock:
            await self._flush_locked()

    async def _flush_locked(self) -> None:
        batch, self._pending = self._pending, []
        if not batch:
            return
        try:
            await self._store.record_polls(batch)
        except StoreError:
            # Nothing of the batch was stored: keep it (its status_changed
            # events included) for the next attempt.
            self._pending[:0] = batch
            raise
        if any(u.event is not None for u in batch):
            self._bus.publish()

    async def finish(self, items: Sequence[Finish]) -> list[bool]:
        """Flush, then store terminal transitions; one answer per item.

        Every finish waiting for the lock joins the next one's transaction: one
        at a time, each paid a poll flush and a commit of its own, which capped
        terminal transitions at about seventy a second.
        """
        future: asyncio.Future[list[bool]] = asyncio.get_running_loop().create_future()
        self._finishing.append((list(items), future))
        async with self._lock:
            if not future.done():
                await self._finish_waiting()
        return await future

    async def _finish_waiting(self) -> None:
        batch, self._finishing = self._finishing, []
        try:
            await self._flush_locked()
            # One store call per caller, submitted together: the store commits them in
            # one transaction yet fails only the caller whose write failed.
            answers = await asyncio.gather(
                *(self._store.finish(items) for items, _ in batch), return_exceptions=True
            )
        except StoreError as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        except BaseException:
            for _, future in batch:
                future.cancel()
            raise
        published = False
        for (_, future), answer in zip(batch, answers, strict=True):
            if future.done():
                continue
            if isinstance(answer, BaseException):
                future.set_exception(answer)
            else:
                future.set_result(answer)
                published = published or any(answer)
        if published:
            self._bus.publish()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self._kick.clear()
            await wait_event(self._kick, self._interval)
            try:
                await self.flush()
            except StoreError as exc:
                log.warning("poll results not stored yet: %s", exc)
                await asyncio.sleep(min(1.0, self._interval * 100))
        await self.flush()


async def checkpoint(
    writer: PollWriter, entries: Sequence[Entry], to_wall: Callable[[float], float]
) -> None:
    """Hand every active tracking's counters to the writer (at shutdown)."""
    for i, entry in enumerate(entries, 1):
        if i % 5000 == 0:
            # 100,000 updates in one go held the loop for 0.25-0.4 s (logged
            # as a stall); /healthz and the metrics still answer while draining.
            await asyncio.sleep(0)
        if entry.last_polled_at is not None:
            writer.add(
                PollUpdate(
                    tracking_id=entry.tracking_id,
                    polls=entry.polls,
                    last_polled_at=entry.last_polled_at,
                    next_poll_at=to_wall(entry.due),
                    last_error=entry.last_error,
                )
            )
