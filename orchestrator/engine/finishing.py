"""Terminal transitions: the end of a tracking, written once.

Every ending goes through the ``Finisher``: an outcome read, a deadline, a not
found, a caller's abandon, on a tracking this process polls or (``finish_elsewhere``)
one another replica polls. Each writes the same record (``abandoned_result``
for an abandon), the same event and the same metrics.

The entry leaves the schedule first; its terminal state and terminal event are
then written in one transaction, shielded from cancellation so that a shutdown
cannot cut a terminal write in half. When the store cannot write (disk full),
nothing was committed: the tracking goes back on the schedule and is read
again later.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from orchestrator import tracing
from orchestrator.clock import Clock
from orchestrator.engine.book import Book
from orchestrator.engine.decision import deadline_result
from orchestrator.engine.entry import Entry
from orchestrator.engine.poll_metrics import PollMetrics
from orchestrator.engine.writer import EngineWriter
from orchestrator.errors import StoreError
from orchestrator.events.cloudevents import EventFactory
from orchestrator.store.base import Finish, Tracking
from orchestrator.vocabulary import Outcome, TrackingState
from orchestrator.workfilter import shown_id

log = logging.getLogger("orchestrator.engine")

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
    ) -> None:
        self._writer = writer
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
        task = asyncio.ensure_future(self._write(entry, outcome, result, remote, polled_at))
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
            event = self._events.terminal(tracking, now_w)
            item = Finish(
                tracking_id=entry.tracking_id,
                outcome=outcome,  # type: ignore[arg-type]
                terminal_at=now_w,
                result=result,
                event=event,
                polls=entry.state.polls,
                last_polled_at=last_polled_at,
                remote_status=entry.state.remote_status,
                remote=remote if remote_changed else None,
                remote_changed=remote_changed,
                last_error=entry.state.last_error,
            )
            attributes = {
                "orchestrator.tracking_id": entry.tracking_id,
                "orchestrator.outcome": outcome,
            }
            with tracing.terminal_span(entry.trace, attributes):
                done = await self._writer.finish([item])
        except StoreError as exc:
            # Nothing was committed: keep the tracking active and look again.
            log.warning(
                "terminal state not stored yet; will read again",
                extra={"fields": {"tracking_id": entry.tracking_id, "error": str(exc)}},
            )
            if not self._stopping():
                self._book.reinstate(entry, self._clock.monotonic() + FINISH_RETRY_S)
            return None
        if done and done[0]:
            self._ended(tracking, now_w - entry.created_at)
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
        item = Finish(
            tracking_id=t.tracking_id,
            outcome=Outcome(outcome),
            terminal_at=now_w,
            result=result,
            event=self._events.terminal(ended, now_w),
        )
        trace = None if t.traceparent is None else (t.traceparent, t.tracestate)
        attributes = {"orchestrator.tracking_id": t.tracking_id, "orchestrator.outcome": outcome}
        with tracing.terminal_span(trace, attributes):
            [done] = await asyncio.shield(self._writer.finish([item]))
        if not done:
            return None
        self._ended(ended, now_w - t.created_at)
        return ended

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
