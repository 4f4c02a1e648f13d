"""The in-memory event log, delivery outbox and sink states: MemoryStore's half that
has no trackings (``memory.py`` adds them), kept apart so that each file reads whole."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

from orchestrator.errors import StoreError, StoreUnavailable
from orchestrator.store import codec
from orchestrator.store.base import (
    Delivery,
    DeliveryState,
    DisabledSink,
    EventRecord,
    NewEvent,
    ReplaySpan,
)


class MemoryLog:
    def __init__(self) -> None:
        self.writable = True
        self._closed = False
        self._events: dict[int, EventRecord] = {}
        self._event_ids: set[str] = set()
        self._deliveries: dict[int, Delivery] = {}
        self._disabled: dict[str, DisabledSink] = {}
        self._last_seq = 0
        self._last_delivery_id = 0

    async def open(self) -> None:
        self._closed = False

    async def close(self) -> None:
        self._closed = True

    def _write(self) -> None:
        self._read()
        if not self.writable:
            raise StoreUnavailable("store cannot write (simulated)")

    def _read(self) -> None:
        if self._closed:
            raise StoreUnavailable("store is closed")

    async def check_writable(self) -> bool:
        return self.writable and not self._closed

    def _check_new_events(self, events: Iterable[NewEvent | None]) -> None:
        seen: set[str] = set()
        for event in filter(None, events):
            if event.event_id in self._event_ids or event.event_id in seen:
                raise StoreError(f"event_id {event.event_id} already exists")
            seen.add(event.event_id)

    def _append_event(self, event: NewEvent) -> None:
        self._last_seq += 1
        record = EventRecord(
            self._last_seq,
            event.event_id,
            event.tracking_id,
            event.type,
            event.time,
            event.payload,
            event.sink,
        )
        self._events[record.seq] = record
        self._event_ids.add(event.event_id)
        for destination in dict.fromkeys(event.destinations):
            url = event.callback_url if destination == "callback" else None
            self._new_delivery(record, destination, url, event.time)

    def _new_delivery(
        self, event: EventRecord, destination: str, url: str | None, due: float
    ) -> None:
        self._last_delivery_id += 1
        self._deliveries[self._last_delivery_id] = Delivery(
            delivery_id=self._last_delivery_id,
            event_seq=event.seq,
            event_id=event.event_id,
            destination=destination,
            url=url,
            state="pending",
            attempts=0,
            next_attempt_at=due,
            created_at=due,
            event_time=event.time,
            payload=event.payload,
        )

    async def events_after(self, after_seq: int, limit: int) -> list[EventRecord]:
        self._read()
        found = [e for seq, e in self._events.items() if seq > after_seq][: max(0, limit)]
        return [replace(e) for e in found]

    async def last_event_seq(self) -> int:
        self._read()
        return self._last_seq

    async def claim_deliveries(
        self, destination: str, now: float, limit: int, lease_s: float
    ) -> list[Delivery]:
        self._write()
        if destination in self._disabled:
            return []
        due = sorted(
            (
                d
                for d in self._deliveries.values()
                if d.destination == destination
                and d.state == "pending"
                and d.next_attempt_at <= now
            ),
            key=lambda d: (d.next_attempt_at, d.delivery_id),
        )[: max(0, limit)]
        for delivery in due:
            delivery.next_attempt_at = now + lease_s
        return [replace(d) for d in due]

    async def outbox_pending_counts(self) -> dict[str, int]:
        self._read()
        pending = (d.destination for d in self._deliveries.values() if d.state == "pending")
        return dict(Counter(pending))

    async def mark_delivered(self, delivery_id: int, at: float, status: int) -> None:
        self._write()
        d = self._deliveries.get(delivery_id)
        if d is not None and d.state != "delivered":
            d.state, d.delivered_at, d.last_status, d.last_error = "delivered", at, status, None
            d.attempts += 1

    async def mark_retry(
        self, delivery_id: int, next_attempt_at: float, status: int | None, error: str
    ) -> None:
        self._write()
        d = self._deliveries.get(delivery_id)
        if d is not None and d.state == "pending":
            d.next_attempt_at, d.last_status, d.last_error = next_attempt_at, status, error
            d.attempts += 1

    async def mark_dead(self, delivery_id: int, at: float, status: int | None, error: str) -> None:
        self._write()
        d = self._deliveries.get(delivery_id)
        if d is not None and d.state == "pending":
            d.state, d.next_attempt_at, d.last_status, d.last_error = "dead", at, status, error
            d.attempts += 1

    async def list_deliveries(
        self, state: DeliveryState | None, limit: int, cursor: str | None
    ) -> tuple[list[Delivery], str | None]:
        self._read()
        after = codec.delivery_after(cursor)
        rows = [
            d
            for i, d in sorted(self._deliveries.items())
            if i > after and (state is None or d.state == state)
        ]
        items, next_cursor = codec.page(rows, codec.clamp_limit(limit), codec.delivery_key)
        return [replace(d) for d in items], next_cursor

    async def get_delivery(self, delivery_id: int) -> Delivery | None:
        self._read()
        found = self._deliveries.get(delivery_id)
        return replace(found) if found else None

    async def redrive_delivery(self, delivery_id: int, now: float) -> Delivery | None:
        self._write()
        d = self._deliveries.get(delivery_id)
        if d is None or d.state != "dead":
            return None
        d.state, d.next_attempt_at = "pending", now
        return replace(d)

    async def replay_deliveries(self, destination: str, span: ReplaySpan, now: float) -> int:
        self._write()
        existing = {
            d.event_seq: d for d in self._deliveries.values() if d.destination == destination
        }
        count = 0
        for seq, event in self._events.items():
            if not span.holds(seq, event.time) or event.sink == destination:
                continue
            count += 1
            d = existing.get(seq)
            if d is not None:
                d.state, d.attempts, d.next_attempt_at = "pending", 0, now
                d.last_status = d.last_error = d.delivered_at = None
            else:
                self._new_delivery(event, destination, None, now)
        return count

    # -- sinks --------------------------------------------------------------------------

    async def disable_sink(self, sink: DisabledSink, event: NewEvent) -> bool:
        self._write()
        if sink.destination in self._disabled:
            return False
        self._check_new_events([event])
        self._disabled[sink.destination] = sink
        self._append_event(event)
        return True

    async def enable_sink(self, destination: str, event: NewEvent) -> bool:
        self._write()
        if destination not in self._disabled:
            return False
        self._check_new_events([event])
        del self._disabled[destination]
        self._append_event(event)
        return True

    async def disabled_sinks(self) -> list[DisabledSink]:
        self._read()
        return [self._disabled[key] for key in sorted(self._disabled)]
