"""The store in memory: the same semantics as SQLite, no I/O, for fast tests of the engine.

Every call is atomic (it checks before it changes anything) and returns copies,
so a caller cannot alter stored state by mutating what it got back. Setting
``writable = False`` makes every write raise StoreUnavailable, as a full disk
would.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace

from orchestrator.errors import StoreError, StoreUnavailable
from orchestrator.store._paging import clamp_limit, decode_cursor, encode_cursor
from orchestrator.store._rows import new_tracking
from orchestrator.store.base import (
    Claimed,
    Delivery,
    DeliveryState,
    EventRecord,
    Finish,
    NewEvent,
    NewTracking,
    PollUpdate,
    ReplaySpan,
    Tracking,
    TrackingQuery,
)
from orchestrator.vocabulary import TrackingState


class MemoryStore:
    shares_work = False

    def __init__(self) -> None:
        self.writable = True
        self._closed = False
        self._trackings: dict[str, Tracking] = {}
        self._by_remote: dict[tuple[str, str, str], str] = {}
        self._events: dict[int, EventRecord] = {}
        self._event_ids: set[str] = set()
        self._deliveries: dict[int, Delivery] = {}
        self._last_seq = 0
        self._last_delivery_id = 0
        self._writes = 0

    async def open(self) -> None:
        self._closed = False

    async def close(self) -> None:
        self._closed = True

    def stats(self) -> dict[str, int]:
        return {"transactions": self._writes, "operations": self._writes}

    def _write(self) -> None:
        if self._closed:
            raise StoreUnavailable("store is closed")
        if not self.writable:
            raise StoreUnavailable("store cannot write (simulated)")
        self._writes += 1

    def _read(self) -> None:
        if self._closed:
            raise StoreUnavailable("store is closed")

    async def check_writable(self) -> bool:
        return self.writable and not self._closed

    # -- trackings ----------------------------------------------------------------------

    async def create_trackings(self, items: Sequence[NewTracking]) -> list[tuple[Tracking, bool]]:
        self._write()
        staged: dict[tuple[str, str, str], Tracking] = {}
        answers: list[tuple[tuple[str, str, str], bool]] = []
        for item in items:
            key = (item.workspace, item.kind, item.remote_id)
            if key in self._by_remote or key in staged:
                answers.append((key, False))
                continue
            taken = {t.tracking_id for t in staged.values()}
            if item.tracking_id in self._trackings or item.tracking_id in taken:
                raise StoreError(f"tracking_id {item.tracking_id} already exists")
            staged[key] = new_tracking(item)
            answers.append((key, True))
        for key, tracking in staged.items():
            self._trackings[tracking.tracking_id] = tracking
            self._by_remote[key] = tracking.tracking_id
        return [(copy.deepcopy(self._trackings[self._by_remote[k]]), new) for k, new in answers]

    async def get_tracking(self, tracking_id: str) -> Tracking | None:
        self._read()
        found = self._trackings.get(tracking_id)
        return copy.deepcopy(found) if found else None

    async def active_counts(self) -> dict[str, int]:
        self._read()
        active = (t for t in self._trackings.values() if t.state == TrackingState.ACTIVE)
        return dict(Counter(t.workspace for t in active))

    async def load_active(
        self, after: str | None = None, limit: int | None = None
    ) -> list[Tracking]:
        return self._active(after, limit)

    def _active(self, after: str | None, limit: int | None) -> list[Tracking]:
        self._read()
        rows = sorted(
            (
                t
                for t in self._trackings.values()
                if t.state == TrackingState.ACTIVE and (after is None or t.tracking_id > after)
            ),
            key=lambda t: t.tracking_id,
        )
        out = [copy.deepcopy(t) for t in rows[:limit]]
        for t in out:
            if t.remote_digest is not None:
                t.remote = None  # as the SQLite store: the digest stands for the body
        return out

    async def list_trackings(self, query: TrackingQuery) -> tuple[list[Tracking], str | None]:
        self._read()
        limit = clamp_limit(query.limit)
        after = decode_cursor(query.cursor, (float, str)) if query.cursor is not None else None
        rows = sorted(
            (t for t in self._trackings.values() if _matches(t, query, after)),
            key=lambda t: (t.created_at, t.tracking_id),
            reverse=True,
        )
        items = [copy.deepcopy(t) for t in rows[:limit]]
        more = len(rows) > limit
        return items, encode_cursor(items[-1].created_at, items[-1].tracking_id) if more else None

    async def record_polls(self, updates: Sequence[PollUpdate]) -> None:
        self._write()
        live = [u for u in updates if self._is_active(u.tracking_id)]
        self._check_new_events(u.event for u in live)
        for update in live:
            tracking = self._trackings[update.tracking_id]
            tracking.polls = update.polls
            tracking.last_polled_at = update.last_polled_at
            tracking.next_poll_at = update.next_poll_at
            tracking.last_error = copy.deepcopy(update.last_error)
            if update.remote_changed:
                tracking.remote_status = update.remote_status
                tracking.remote = copy.deepcopy(update.remote)
                tracking.remote_fingerprint = update.fingerprint
                tracking.remote_digest = update.digest
            if update.event is not None:
                self._append_event(update.event)

    async def finish(self, items: Sequence[Finish]) -> list[bool]:
        self._write()
        moving: set[str] = set()
        answers: list[bool] = []
        for item in items:
            moved = self._is_active(item.tracking_id) and item.tracking_id not in moving
            if moved:
                moving.add(item.tracking_id)
            answers.append(moved)
        finishing = [item for item, moved in zip(items, answers, strict=True) if moved]
        self._check_new_events(item.event for item in finishing)
        for item in finishing:
            self._finish_one(item)
        return answers

    def _finish_one(self, item: Finish) -> None:
        tracking = self._trackings[item.tracking_id]
        tracking.state = TrackingState.TERMINAL
        tracking.outcome = item.outcome
        tracking.terminal_at = item.terminal_at
        tracking.result = copy.deepcopy(item.result)
        tracking.next_poll_at = None
        if item.polls is not None:
            tracking.polls = item.polls
            tracking.last_error = copy.deepcopy(item.last_error)
        elif item.last_error is not None:
            tracking.last_error = copy.deepcopy(item.last_error)
        if item.last_polled_at is not None:
            tracking.last_polled_at = item.last_polled_at
        if item.remote_changed:
            tracking.remote_status = item.remote_status
            tracking.remote = copy.deepcopy(item.remote)
        self._append_event(item.event)

    async def prune(self, before: float, batch: int) -> int:
        self._write()
        pending_trackings = {
            self._events[d.event_seq].tracking_id
            for d in self._deliveries.values()
            if d.state == "pending"
        }
        doomed = sorted(
            (
                t
                for t in self._trackings.values()
                if t.state == TrackingState.TERMINAL
                and t.terminal_at is not None
                and t.terminal_at < before
                and t.tracking_id not in pending_trackings
            ),
            key=lambda t: t.terminal_at or 0.0,
        )[: max(0, batch)]
        ids = {t.tracking_id for t in doomed}
        seqs = {seq for seq, e in self._events.items() if e.tracking_id in ids}
        for t in doomed:
            del self._trackings[t.tracking_id]
            del self._by_remote[(t.workspace, t.kind, t.remote_id)]
        for seq in seqs:
            self._event_ids.discard(self._events.pop(seq).event_id)
        for delivery_id in [i for i, d in self._deliveries.items() if d.event_seq in seqs]:
            del self._deliveries[delivery_id]
        return len(doomed)

    def _is_active(self, tracking_id: str) -> bool:
        tracking = self._trackings.get(tracking_id)
        return tracking is not None and tracking.state == TrackingState.ACTIVE

    # -- events and deliveries ----------------------------------------------------------

    def _check_new_events(self, events: Iterable[NewEvent | None]) -> None:
        seen: set[str] = set()
        for event in events:
            if event is None:
                continue
            if event.event_id in self._event_ids or event.event_id in seen:
                raise StoreError(f"event_id {event.event_id} already exists")
            seen.add(event.event_id)

    def _append_event(self, event: NewEvent) -> None:
        self._last_seq += 1
        seq = self._last_seq
        self._events[seq] = EventRecord(
            seq, event.event_id, event.tracking_id, event.type, event.time, event.payload
        )
        self._event_ids.add(event.event_id)
        record = self._events[seq]
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

    async def pending_destinations(self) -> list[str]:
        self._read()
        return sorted({d.destination for d in self._deliveries.values() if d.state == "pending"})

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
        size = clamp_limit(limit)
        after = decode_cursor(cursor, (int,))[0] if cursor is not None else 0
        rows = [
            d
            for i, d in sorted(self._deliveries.items())
            if i > after and (state is None or d.state == state)
        ]
        items = [replace(d) for d in rows[:size]]
        return items, encode_cursor(items[-1].delivery_id) if len(rows) > size else None

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
            if not span.holds(seq, event.time):
                continue
            count += 1
            d = existing.get(seq)
            if d is not None:
                d.state, d.attempts, d.next_attempt_at = "pending", 0, now
                d.last_status = d.last_error = d.delivered_at = None
            else:
                self._new_delivery(event, destination, None, now)
        return count

    # -- leases: one owner holds everything ------------------------------------------

    async def claim_trackings(self, limit: int) -> Claimed:
        return Claimed()

    async def renew_leases(self) -> list[str]:
        return []

    async def release_leases(self, tracking_ids: Sequence[str] | None = None) -> None:
        return None

    def forget_leases(self) -> None:
        return None

    async def heartbeat(self, leases: int) -> list[str]:
        return []


def _matches(t: Tracking, q: TrackingQuery, after: tuple[float, str] | None) -> bool:
    if q.state is not None and t.state != q.state:
        return False
    if q.kind is not None and t.kind != q.kind:
        return False
    if q.outcome is not None and t.outcome != q.outcome:
        return False
    if q.workspace is not None and t.workspace != q.workspace:
        return False
    if any(t.labels.get(k) != v for k, v in q.labels.items()):
        return False
    return after is None or (t.created_at, t.tracking_id) < after
