"""Terminal transitions: the end of a tracking, written once.

The entry leaves the schedule first; its terminal state and terminal event are
then written in one transaction, shielded from cancellation so that a shutdown
cannot cut a terminal write in half. When the store cannot write (disk full),
nothing was committed: the tracking goes back on the schedule and is read
again later.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from orchestrator.clock import Clock
from orchestrator.engine.decision import deadline_result
from orchestrator.engine.entry import Entry
from orchestrator.engine.probes import PollMetrics
from orchestrator.engine.writer import EngineWriter
from orchestrator.errors import StoreError
from orchestrator.events.cloudevents import EventFactory
from orchestrator.store.base import Finish, Tracking

log = logging.getLogger("orchestrator.engine")

# After a failed terminal write (store full), look again this much later.
FINISH_RETRY_S = 2.0


class Owner(Protocol):
    """Who holds the entries (the engine), told of each step of an ending."""

    def release(self, entry: Entry) -> None:
        """The entry is ending: off the schedule."""

    def reinstate(self, entry: Entry) -> None:
        """Its terminal write failed (nothing was committed): read it again later."""

    def ended(self, entry: Entry) -> None:
        """Its terminal state is stored."""


class Finisher:
    def __init__(
        self,
        writer: EngineWriter,
        events: EventFactory,
        probes: PollMetrics,
        clock: Clock,
        owner: Owner,
    ) -> None:
        self._writer = writer
        self._events = events
        self._probes = probes
        self._clock = clock
        self._owner = owner
        self.tasks: set[asyncio.Task[Tracking | None]] = set()

    async def expire(self, entry: Entry) -> None:
        """The deadline passed while Retry-After forbade the last read."""
        result = {**deadline_result(entry, entry.last_error), **(entry.summary or {})}
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
        self._owner.release(entry)
        entry.gen += 1
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
                polls=entry.polls,
                last_polled_at=last_polled_at,
                remote_status=entry.remote_status,
                remote=remote if remote_changed else None,
                remote_changed=remote_changed,
                last_error=entry.last_error,
            )
            done = await self._writer.finish([item])
        except StoreError as exc:
            # Nothing was committed: keep the tracking active and look again.
            log.warning(
                "terminal state not stored yet; will read again",
                extra={"fields": {"tracking_id": entry.tracking_id, "error": str(exc)}},
            )
            self._owner.reinstate(entry)
            return None
        self._owner.ended(entry)
        self._probes.active(entry.workspace, entry.kind).dec()
        if done and done[0]:
            elapsed = now_w - entry.created_at
            self._probes.terminal(entry.workspace, entry.kind, outcome, elapsed, result)
            log.info(
                "tracking finished",
                extra={
                    "fields": {
                        "tracking_id": entry.tracking_id,
                        "workspace": entry.workspace,
                        "kind": entry.kind,
                        "remote_id": entry.remote_id,
                        "outcome": outcome,
                        "remote_status": entry.remote_status,
                        "polls": entry.polls,
                    }
                },
            )
        return tracking
