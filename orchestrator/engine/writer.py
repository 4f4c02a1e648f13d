"""The engine's one write path: an ordered stream into the store, and every ending.

Poll results, read-backs of a stored body and terminal writes all go into one
anyio memory stream, and one task writes them in the order they were sent.
Order is what keeps a tracking's status_changed events before its terminal
event, with no flush in between. The task writes whatever has arrived while
the previous write was committing: the store's group commit is the only
batching there is (no timer of our own). A poll result is not acknowledged to
anyone, so it need not be durable before the next poll.

Every ending goes through the ``Finisher``: an outcome read, a deadline, a not
found, a caller's abandon, on a tracking this process polls or (``finish_elsewhere``)
one another replica polls. Each writes the same record (``abandoned_result``
for an abandon), the same event and the same metrics. The entry leaves the
schedule first; its terminal state and terminal event are then written in one
transaction, shielded from cancellation so that a shutdown cannot cut a
terminal write in half. When the store cannot write (disk full), nothing was
committed: the tracking goes back on the schedule and is read again later.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio

from orchestrator import tracing
from orchestrator.clock import Clock
from orchestrator.engine.book import Book
from orchestrator.engine.decision import deadline_result
from orchestrator.engine.ends import Ends, group_key
from orchestrator.engine.entry import Entry
from orchestrator.engine.poll_metrics import PollMetrics
from orchestrator.errors import StoreError
from orchestrator.events.bus import EventBus
from orchestrator.events.cloudevents import EventFactory
from orchestrator.store.base import Finish, PollUpdate, Store, Tracking
from orchestrator.vocabulary import Outcome, TrackingState
from orchestrator.workfilter import shown_id

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
    tracking_id: str | None  # None: a flush, nothing to read
    answer: asyncio.Future[Tracking | None]


_Item = PollUpdate | _Finishing | _ReadBack


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
        await self.stored(None)

    async def stored(self, tracking_id: str | None) -> Tracking | None:
        """The tracking as stored once everything sent before it is written."""
        answer: asyncio.Future[Tracking | None] = asyncio.get_running_loop().create_future()
        self._send.send_nowait(_ReadBack(tracking_id, answer))
        return await answer

    async def finish(self, items: Sequence[Finish]) -> list[bool]:
        """Store terminal transitions after everything sent before; one answer per item."""
        answer: asyncio.Future[list[bool]] = asyncio.get_running_loop().create_future()
        self._send.send_nowait(_Finishing(list(items), answer))
        return await answer

    async def checkpoint(self, entries: Sequence[Entry], to_wall: float) -> None:
        """Every active entry's counters as poll results (at shutdown: reads that
        changed nothing are not written as they happen); ``to_wall``: wall minus
        monotonic time."""
        for i, entry in enumerate(entries, 1):
            if i % 5000 == 0:
                # 100,000 updates in one go hold the loop 0.25 s (logged as a stall),
                # 0.03-0.05 s with this; /healthz and the metrics answer while draining.
                await asyncio.sleep(0)
            polled_at = entry.state.last_polled_at
            if polled_at is not None:
                self.add(entry.update(polled_at, None, False, entry.due + to_wall))

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
            if finishing and not isinstance(item, _Finishing):
                await self._finish(finishing)
                finishing = []
            if isinstance(item, PollUpdate):
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
                await self._read_back(item)
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
            tid = item.tracking_id
            _settle(item.answer, None if tid is None else await self._store.get_tracking(tid))
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


# After a failed terminal write (store full), look again this much later.
FINISH_RETRY_S = 2.0


def abandoned_result(remote_id: str, remote_status: str | None) -> dict[str, Any]:
    """An abandoned tracking's result: the remote id it shows (none for work found by
    filter, whose key names no remote resource) and the last status read."""
    return {"remote_id": shown_id(remote_id), "last_remote_status": remote_status}


class Finisher:
    def __init__(
        self,
        writer: EngineWriter,
        events: EventFactory,
        poll_metrics: PollMetrics,
        clock: Clock,
        book: Book,
        stopping: Callable[[], bool],
        ends: Ends | None = None,
    ) -> None:
        self._writer = writer
        self.ends = ends or Ends()  # the callers waiting for an end (``?wait=``)
        self._events = events
        self._poll_metrics = poll_metrics
        self._clock = clock
        self._book = book
        self._stopping = stopping  # once the engine stops, a failed write is left
        self.tasks: set[asyncio.Task[Tracking | None]] = set()

    async def expire(self, entry: Entry) -> None:
        """The deadline passed while Retry-After forbade the last read."""
        result = deadline_result(entry.remote_id, entry.state)
        await self.finish(entry, "deadline_exceeded", result)

    async def finish(
        self,
        entry: Entry,
        outcome: str,
        result: dict[str, Any] | None,
        *,
        remote: Any = None,
        polled_at: float | None = None,
    ) -> Tracking | None:
        """Write the terminal state and its event; shielded from cancellation."""
        self._book.finish(entry)
        epoch = self._book.epoch
        task = asyncio.ensure_future(self._write(entry, outcome, result, remote, polled_at, epoch))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return await asyncio.shield(task)

    async def _write(
        self,
        entry: Entry,
        outcome: str,
        result: dict[str, Any] | None,
        remote: Any,
        polled_at: float | None,
        epoch: int,
    ) -> Tracking | None:
        now_w = self._clock.now()
        remote_changed = remote is not None
        last_polled_at = polled_at
        try:
            if not remote_changed or last_polled_at is None:
                # No body in hand (deadline, not found, abandon): the store has
                # the last one, once the writes sent before are in.
                stored = await self._writer.stored(entry.tracking_id)
                if stored is not None:
                    if not remote_changed:
                        remote = stored.remote
                    last_polled_at = last_polled_at or stored.last_polled_at
            tracking = entry.to_tracking(
                state="terminal",
                outcome=outcome,
                remote=remote,
                result=result,
                last_polled_at=last_polled_at,
                terminal_at=now_w,
            )
            item = Finish(
                tracking_id=entry.tracking_id,
                outcome=outcome,  # type: ignore[arg-type]
                terminal_at=now_w,
                result=result,
                event=self._events.terminal(tracking, now_w),
                polls=entry.state.polls,
                last_polled_at=last_polled_at,
                remote_status=entry.state.remote_status,
                remote=remote if remote_changed else None,
                remote_changed=remote_changed,
                last_error=entry.state.last_error,
                group_name=entry.group_name,
                group_event=self._events.group if entry.group_name else None,
            )
            await self._store(tracking, item, now_w - entry.created_at)
        except StoreError as exc:
            # Nothing was committed: keep the tracking active and look again.
            log.warning(
                "terminal state not stored yet; will read again",
                extra={"fields": {"tracking_id": entry.tracking_id, "error": str(exc)}},
            )
            if not self._stopping():
                self._book.reinstate(entry, self._clock.monotonic() + FINISH_RETRY_S, epoch)
            return None
        return tracking

    async def finish_elsewhere(
        self, t: Tracking, outcome: str, result: dict[str, Any] | None
    ) -> Tracking | None:
        """End ``t``, which another replica polls (a caller's abandon: the store takes
        it without the lease, and the holder's later writes are refused). The same
        record, event and metrics as ``finish``; None when it had ended meanwhile."""
        now_w = self._clock.now()
        ended = dataclasses.replace(
            t,
            state=TrackingState.TERMINAL,
            outcome=Outcome(outcome),
            result=result,
            terminal_at=now_w,
            next_poll_at=None,
        )
        event = self._events.terminal(ended, now_w)
        item = Finish(t.tracking_id, Outcome(outcome), now_w, result, event)
        if t.group_name is not None:
            item.group_name, item.group_event = t.group_name, self._events.group
        done = await self._store(ended, item, now_w - t.created_at, shield=True)
        return ended if done else None

    async def _store(self, t: Tracking, item: Finish, elapsed: float, shield: bool = False) -> bool:
        """Write ``t``'s end in its terminal span; once stored, count and log it."""
        trace = None if t.traceparent is None else (t.traceparent, t.tracestate)
        attributes = {"orchestrator.tracking_id": t.tracking_id, "orchestrator.outcome": t.outcome}
        written = self._writer.finish([item])
        with tracing.terminal_span(trace, attributes):
            [done] = await (asyncio.shield(written) if shield else written)
        if done:
            self.ends.ended(t.tracking_id)
            if t.group_name is not None:  # its group may have ended with it
                self.ends.ended(group_key(t.group_name))
            self._ended(t, elapsed)
        return done

    def _ended(self, t: Tracking, elapsed: float) -> None:
        """A terminal state this process wrote: counted and logged."""
        assert t.outcome is not None
        trace_id = None if t.traceparent is None else t.traceparent[3:35]
        self._poll_metrics.terminal(t.workspace, t.kind, t.outcome, elapsed, t.result, trace_id)
        log.info(
            "tracking finished",
            extra={
                "fields": {
                    "tracking_id": t.tracking_id,
                    "workspace": t.workspace,
                    "kind": t.kind,
                    "remote_id": t.remote_id,
                    "outcome": t.outcome,
                    "remote_status": t.remote_status,
                    "polls": t.polls,
                }
            },
        )
