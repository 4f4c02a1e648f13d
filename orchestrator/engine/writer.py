"""The engine's one write path: an ordered stream into the store.

Poll results, read-backs of a stored body and terminal writes all go into one
anyio memory stream, and one task writes them in the order they were sent.
Order is what keeps a tracking's status_changed events before its terminal
event, with no flush in between. The task writes whatever has arrived while
the previous write was committing: the store's group commit is the only
batching there is (no timer of our own). A poll result is not acknowledged to
anyone, so it need not be durable before the next poll.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio

from orchestrator.engine.entry import Entry
from orchestrator.errors import StoreError
from orchestrator.events.bus import EventBus
from orchestrator.store.base import Finish, PollUpdate, Store, Tracking

log = logging.getLogger("orchestrator.engine")

T = TypeVar("T")

# After a failed poll write (store full), wait this long before trying again.
RETRY_S = 0.5


@dataclass(slots=True)
class _Finishing:
    items: list[Finish]
    answer: asyncio.Future[list[bool]]


@dataclass(slots=True)
class _ReadBack:
    tracking_id: str
    answer: asyncio.Future[Tracking | None]


@dataclass(slots=True)
class _Flush:
    answer: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


_Item = PollUpdate | _Finishing | _ReadBack | _Flush


class EngineWriter:
    def __init__(self, store: Store, bus: EventBus, max_batch: int) -> None:
        self._store = store
        self._bus = bus
        self._max_batch = max(1, max_batch)
        self._send, self._receive = anyio.create_memory_object_stream[_Item](math.inf)
        self._failed: list[PollUpdate] = []  # not stored yet: written before anything else
        self._writing = 0

    @property
    def backlog(self) -> int:
        """Sent and not yet stored: waiting in the stream, being written, or failed."""
        return self._send.statistics().current_buffer_used + self._writing + len(self._failed)

    def add(self, update: PollUpdate) -> None:
        self._send.send_nowait(update)

    async def flush(self) -> None:
        """Returns once everything sent before it is stored (raises StoreError if not)."""
        item = _Flush()
        self._send.send_nowait(item)
        await item.answer

    async def stored(self, tracking_id: str) -> Tracking | None:
        """The tracking as stored once everything sent before it is written."""
        answer: asyncio.Future[Tracking | None] = asyncio.get_running_loop().create_future()
        self._send.send_nowait(_ReadBack(tracking_id, answer))
        return await answer

    async def finish(self, items: Sequence[Finish]) -> list[bool]:
        """Store terminal transitions after everything sent before; one answer per item."""
        answer: asyncio.Future[list[bool]] = asyncio.get_running_loop().create_future()
        self._send.send_nowait(_Finishing(list(items), answer))
        return await answer

    async def checkpoint(self, entries: Sequence[Entry], to_wall: Callable[[float], float]) -> None:
        """Every active entry's counters as poll results (at shutdown: reads that
        changed nothing are not written as they happen)."""
        for i, entry in enumerate(entries, 1):
            if i % 5000 == 0:
                # 100,000 updates in one go hold the loop 0.25 s (logged as a stall),
                # 0.03-0.05 s with this; /healthz and the metrics answer while draining.
                await asyncio.sleep(0)
            polled_at = entry.state.last_polled_at
            if polled_at is not None:
                self.add(entry.update(polled_at, None, False, to_wall(entry.due)))

    def close(self) -> None:
        """No more writes: ``run`` writes what was sent, then returns."""
        self._send.close()

    async def run(self) -> None:
        async with self._receive:
            while True:
                batch: list[_Item] = []
                try:
                    # Poll results left by a failed write are tried again even if
                    # nothing new arrives.
                    with anyio.fail_after(RETRY_S) if self._failed else nullcontext():
                        batch.append(await self._receive.receive())
                except TimeoutError:
                    pass
                except anyio.EndOfStream:
                    break
                while batch and len(batch) < self._max_batch:
                    try:
                        batch.append(self._receive.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                self._writing = len(batch)
                try:
                    ok = await self._write(batch)
                finally:
                    self._writing = 0
                if not ok:
                    await anyio.sleep(RETRY_S)
        if self._failed and not await self._write([]):
            log.error(
                "poll results lost at shutdown: the store cannot write",
                extra={"fields": {"count": len(self._failed)}},
            )

    async def _write(self, batch: list[_Item]) -> bool:
        """Write ``batch`` in order; False when poll results are left unstored.

        After a failed write nothing later in the batch is written: its poll
        results wait with the failed ones, and the rest is failed with the error.
        """
        polls, self._failed = self._failed, []
        finishing: list[_Finishing] = []
        error: StoreError | None = None
        for item in batch:
            if isinstance(item, PollUpdate):
                if finishing:
                    await self._finish(finishing)
                    finishing = []
                polls.append(item)
                continue
            if error is None:
                error = await self._record(polls)
                polls = []
            if error is not None:
                _fail(item.answer, error)
            elif isinstance(item, _Finishing):
                finishing.append(item)  # consecutive ones are written together
            else:
                if finishing:
                    await self._finish(finishing)
                    finishing = []
                if isinstance(item, _ReadBack):
                    await self._read_back(item)
                else:
                    _settle(item.answer, None)
        if finishing:
            await self._finish(finishing)
        if error is None:
            error = await self._record(polls)
            polls = []
        self._failed += polls
        return error is None

    async def _record(self, polls: list[PollUpdate]) -> StoreError | None:
        if not polls:
            return None
        try:
            await self._store.record_polls(polls)
        except StoreError as exc:
            # Nothing of them was stored: they go first in the next write.
            log.warning("poll results not stored yet: %s", exc)
            self._failed = polls
            return exc
        if any(u.event is not None for u in polls):
            self._bus.publish()
        return None

    async def _read_back(self, item: _ReadBack) -> None:
        try:
            _settle(item.answer, await self._store.get_tracking(item.tracking_id))
        except StoreError as exc:
            _fail(item.answer, exc)

    async def _finish(self, waiting: list[_Finishing]) -> None:
        # One store call per caller, submitted together: the store commits them in
        # one transaction yet fails only the caller whose write failed.
        answers = await asyncio.gather(
            *(self._store.finish(w.items) for w in waiting), return_exceptions=True
        )
        published = False
        for w, answer in zip(waiting, answers, strict=True):
            if isinstance(answer, BaseException):
                _fail(w.answer, answer)
            else:
                _settle(w.answer, answer)
                published = published or any(answer)
        if published:
            self._bus.publish()


def _settle(future: asyncio.Future[T], value: T) -> None:
    if not future.done():
        future.set_result(value)


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)
