"""How the store's dataclasses are encoded, alike in every backend.

As rows of the SQL schemas (``queries.py``, ``pg_queries.py``), JSON as orjson
bytes; a place in a listing as an opaque cursor, and a page size as a clamped
limit, so that paging behaves the same on memory, SQLite and PostgreSQL. The SQL
stores' reads, which differ only in their statements, are written once here
(``SqlShared``).
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import AsyncGenerator, Awaitable, Callable, Container, Iterable, Sequence
from types import ModuleType
from typing import Any, TypeVar

import orjson

from orchestrator.errors import StoreError
from orchestrator.store.base import (
    Delivery,
    DeliveryState,
    DisabledSink,
    EventRecord,
    Finish,
    NewEvent,
    NewTracking,
    PollUpdate,
    ReplaySpan,
    Tracking,
    TrackingQuery,
    WorkClassSummary,
    paged_active,
)
from orchestrator.store.queries import TRACKING_COLUMNS
from orchestrator.vocabulary import Outcome, TrackingState

MAX_PAGE = 1000
T = TypeVar("T")

# Stored text back to members by a dict lookup, several times cheaper than calling
# the enum: a restart reads 100,000 rows.
_STATES = {s.value: s for s in TrackingState}
_OUTCOMES: dict[str | None, Outcome | None] = {None: None, **{o.value: o for o in Outcome}}


class InvalidCursor(StoreError, ValueError):
    """The paging cursor was not produced by this store (the API answers 400)."""


# -- cursors and limits ---------------------------------------------------------------


def clamp_limit(limit: int) -> int:
    return max(1, min(int(limit), MAX_PAGE))


def encode_cursor(*key: Any) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(list(key))).decode("ascii").rstrip("=")


def decode_cursor(cursor: str, types: tuple[type, ...]) -> tuple[Any, ...]:
    """The key a cursor was made from; InvalidCursor when it was not made by encode_cursor."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = orjson.loads(raw)
    except (binascii.Error, ValueError, orjson.JSONDecodeError) as exc:
        raise InvalidCursor(f"invalid cursor: {cursor!r}") from exc
    if not isinstance(key, list) or len(key) != len(types):
        raise InvalidCursor(f"invalid cursor: {cursor!r}")
    values: list[Any] = []
    for value, kind in zip(key, types, strict=True):
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise InvalidCursor(f"invalid cursor: {cursor!r}")
        values.append(value)
    return tuple(values)


# -- rows -----------------------------------------------------------------------------


def dump(value: Any) -> bytes | None:
    return None if value is None else orjson.dumps(value)


def load(blob: bytes | str | None) -> Any:
    return None if blob is None else orjson.loads(blob)


TRACKING_FIELDS = tuple(c.strip() for c in TRACKING_COLUMNS.split(","))  # Tracking's names


def tracking(row: Sequence[Any]) -> Tracking:
    """A row of ``queries.TRACKING_COLUMNS``, by name (CLAIM's lease columns after them
    are left out), with the enums and the JSON decoded."""
    v = dict(zip(TRACKING_FIELDS, row, strict=False))
    v["state"], v["outcome"] = _STATES[v["state"]], _OUTCOMES[v["outcome"]]
    for name in ("remote", "result", "last_error"):
        v[name] = load(v[name])
    v["labels"] = load(v["labels"]) or {}
    return Tracking(**v)


def active_tracking(row: Sequence[Any]) -> Tracking:
    """A row of ``queries.ACTIVE_ALL``, as ``tracking`` reads a whole row, at a fifth
    of the cost: a resume reads every active row."""
    (tid, ws, kind, rid, status, remote, polls, polled_at, error, deadline, created, labels,
     corr, callback, notify, fingerprint, digest, source, work_class, started, traceparent,
     tracestate, group_name) = row  # fmt: skip
    return Tracking(
        tid, ws, kind, rid, TrackingState.ACTIVE, None, status,
        None if remote is None else orjson.loads(remote),
        None, polls, polled_at, None,
        None if error is None else orjson.loads(error),
        deadline, created, None,
        {} if labels == b"{}" or labels is None else orjson.loads(labels),
        corr, callback, notify, fingerprint, digest, source, None, work_class, started,
        traceparent, tracestate, group_name,
    )  # fmt: skip


def new_tracking(item: NewTracking) -> Tracking:
    """The row ``queries.insert_tracking_rows`` creates, without reading it back."""
    return Tracking(
        tracking_id=item.tracking_id,
        workspace=item.workspace,
        kind=item.kind,
        remote_id=item.remote_id,
        state=TrackingState.ACTIVE,
        outcome=None,
        remote_status=None,
        remote=item.remote,
        result=None,
        polls=0,
        last_polled_at=None,
        next_poll_at=item.next_poll_at,
        last_error=None,
        deadline_at=item.deadline_at,
        created_at=item.created_at,
        terminal_at=None,
        labels=dict(item.labels),
        correlation_id=item.correlation_id,
        callback_url=item.callback_url,
        notify=item.notify,
        deadline_source=item.deadline_source,
        work_class=item.work_class,
        traceparent=item.traceparent,
        tracestate=item.tracestate,
        group_name=item.group_name,
    )


def insert_tracking_params(item: NewTracking) -> tuple[Any, ...]:
    return (
        item.tracking_id,
        item.workspace,
        item.kind,
        item.remote_id,
        item.next_poll_at,
        item.deadline_at,
        item.created_at,
        orjson.dumps(item.labels),
        item.correlation_id,
        item.callback_url,
        item.notify,
        item.deadline_source,
        dump(item.remote),
        item.work_class,
        item.traceparent,
        item.tracestate,
        item.group_name,
    )


def label_rows(items: Sequence[NewTracking], created: Container[str]) -> list[tuple[str, ...]]:
    """(tracking_id, key, value) of each label of the items whose row was created."""
    return [
        (item.tracking_id, k, v)
        for item in items
        if item.labels and item.tracking_id in created
        for k, v in item.labels.items()
    ]


def delivery(row: Sequence[Any]) -> Delivery:
    """A row of ``queries.DELIVERY_COLUMNS`` (Delivery's fields in order)."""
    r = list(row)
    r[10] = bytes(r[10])
    return Delivery(*r)


def event(row: Sequence[Any]) -> EventRecord:
    """A row of ``queries.EVENT_COLUMNS`` (EventRecord's fields in order)."""
    r = list(row)
    r[5] = bytes(r[5])
    return EventRecord(*r)


# -- writes ---------------------------------------------------------------------------


def poll_row(u: PollUpdate) -> list[Any]:
    """An update as a row: tracking_id, polls, last_polled_at, next_poll_at, last_error,
    remote_changed, remote_status, remote, fingerprint, digest (these four None unless
    the body changed), work_class, work_started_at, deadline_at, deadline_source."""
    changed = u.remote_changed
    deadline, source = u.deadline if u.deadline is not None else (None, None)
    return [
        u.tracking_id, u.polls, u.last_polled_at, u.next_poll_at, dump(u.last_error), changed,
        u.remote_status if changed else None,
        dump(u.remote) if changed else None,
        u.fingerprint if changed else None,
        u.digest if changed else None,
        u.work_class, u.work_started_at, deadline, source,
    ]  # fmt: skip


def fold_polls(updates: Iterable[PollUpdate]) -> list[list[Any]]:
    """Each tracking's updates folded into one ``poll_row`` that leaves it as applying
    them in turn would: the last update's counters and error, the last changed body,
    the last class of the work, the last derived deadline."""
    rows: dict[str, list[Any]] = {}
    for u in updates:
        fresh = poll_row(u)
        row = rows.setdefault(u.tracking_id, fresh)
        if row is fresh:
            continue
        row[1:5] = fresh[1:5]
        if u.remote_changed:
            row[5:10] = fresh[5:10]
        if u.work_class is not None:
            row[10:12] = fresh[10:12]
        if u.deadline is not None:
            row[12:14] = fresh[12:14]
    return list(rows.values())


def finish_row(item: Finish) -> list[Any]:
    """tracking_id, outcome, terminal_at, result, polls, last_polled_at, last_error,
    remote_changed, remote_status, remote (these two None unless the body changed)."""
    changed = item.remote_changed
    return [
        item.tracking_id, item.outcome, item.terminal_at, dump(item.result), item.polls,
        item.last_polled_at, dump(item.last_error), changed,
        item.remote_status if changed else None,
        dump(item.remote) if changed else None,
    ]  # fmt: skip


# -- listings -------------------------------------------------------------------------


def page(items: Sequence[T], limit: int, key: Callable[[T], Any]) -> tuple[list[T], str | None]:
    """The items read with ``limit + 1`` as one page, and the cursor to the next (made
    of the last item's ``key``, a tuple)."""
    more = len(items) > limit
    return list(items[:limit]), encode_cursor(*key(items[limit - 1])) if more else None


def tracking_key(t: Tracking) -> tuple[float, str]:
    return (t.created_at, t.tracking_id)


def delivery_key(d: Delivery) -> tuple[int]:
    return (d.delivery_id,)


def delivery_after(cursor: str | None) -> int:
    return 0 if cursor is None else int(decode_cursor(cursor, (int,))[0])


class SqlShared:
    """The reads and one-statement writes of the SQL stores, alike but for their
    statements: each backend's ``_q`` (``queries`` or ``pg_queries``) names the same ones."""

    _q: ModuleType
    _NO_LIMIT: int | None  # load_active's LIMIT for no limit
    _fetch: Callable[..., Awaitable[list[Any]]]  # (sql, *params): the rows
    _execute: Callable[..., Awaitable[int]]  # (sql, *params): one write, the rows changed
    # (sql, event, *params): a sink's state changed by one write, with its event; False,
    # with nothing written, when the write changed nothing.
    _change_sink: Callable[..., Awaitable[bool]]

    async def get_tracking(self, tracking_id: str) -> Tracking | None:
        rows = await self._fetch(self._q.TRACKING_BY_ID, tracking_id)
        return tracking(rows[0]) if rows else None

    async def load_active(
        self, after: str | None = None, limit: int | None = None
    ) -> list[Tracking]:
        size = self._NO_LIMIT if limit is None else limit
        return [
            tracking(row) for row in await self._fetch(self._q.ACTIVE_TRACKINGS, after or "", size)
        ]

    def active_chunks(self, size: int) -> AsyncGenerator[list[Tracking], None]:
        return paged_active(self, size)

    async def active_counts(self) -> dict[str, int]:
        return {str(ws): int(n) for ws, n in await self._fetch(self._q.ACTIVE_COUNTS)}

    async def list_trackings(self, query: TrackingQuery) -> tuple[list[Tracking], str | None]:
        limit = clamp_limit(query.limit)
        filters = (query.state, query.kind, query.outcome, query.workspace, query.group)
        params: list[Any] = [value for value in filters if value is not None]
        for pair in sorted(query.labels.items()):
            params.extend(pair)
        if query.cursor is not None:
            created_at, tracking_id = decode_cursor(query.cursor, (float, str))
            params.extend((created_at, created_at, tracking_id))
        present = tuple(value is not None for value in filters)
        sql = self._q.list_trackings(present, len(query.labels), query.cursor is not None)
        rows = await self._fetch(sql, *params, limit + 1)
        return page([tracking(row) for row in rows], limit, tracking_key)

    async def events_after(self, after_seq: int, limit: int) -> list[EventRecord]:
        rows = await self._fetch(self._q.EVENTS_AFTER, after_seq, max(0, limit))
        return [event(row) for row in rows]

    async def last_event_seq(self) -> int:
        rows = await self._fetch(self._q.LAST_EVENT_SEQ)
        return int(rows[0][0]) if rows else 0

    async def outbox_pending_counts(self) -> dict[str, int]:
        return {row[0]: int(row[1]) for row in await self._fetch(self._q.PENDING_COUNTS)}

    async def disabled_sinks(self) -> list[DisabledSink]:
        rows = await self._fetch(self._q.DISABLED_SINKS)
        return [DisabledSink(str(r[0]), float(r[1]), str(r[2])) for r in rows]

    async def disable_sink(self, sink: DisabledSink, event: NewEvent) -> bool:
        params = (sink.destination, sink.since, sink.reason)
        return await self._change_sink(self._q.DISABLE_SINK, event, *params)

    async def enable_sink(self, destination: str, event: NewEvent) -> bool:
        return await self._change_sink(self._q.ENABLE_SINK, event, destination)

    async def load_work_classes(self) -> list[WorkClassSummary]:
        rows = await self._fetch(self._q.WORK_CLASSES)
        return [
            WorkClassSummary(str(r[0]), str(r[1]), str(r[2]), load(r[3]), float(r[4])) for r in rows
        ]

    async def get_delivery(self, delivery_id: int) -> Delivery | None:
        rows = await self._fetch(self._q.DELIVERY_BY_ID, delivery_id)
        return delivery(rows[0]) if rows else None

    async def list_deliveries(
        self, state: DeliveryState | None, limit: int, cursor: str | None
    ) -> tuple[list[Delivery], str | None]:
        size, after = clamp_limit(limit), delivery_after(cursor)
        if state is None:
            rows = await self._fetch(self._q.DELIVERIES_ALL, after, size + 1)
        else:
            rows = await self._fetch(self._q.DELIVERIES_BY_STATE, state, after, size + 1)
        return page([delivery(row) for row in rows], size, delivery_key)

    async def replay_deliveries(self, destination: str, span: ReplaySpan, now: float) -> int:
        # Bounds PostgreSQL can bind (a bigint, finite floats): no event lies beyond them.
        since = span.since if math.isfinite(span.since) else -1e308
        until = span.until if math.isfinite(span.until) else 1e308
        bounds = (span.after_seq, min(span.until_seq, 2**62), since, until)
        sql = self._q.REPLAY_DELIVERIES
        return await self._execute(sql, destination, now, now, *bounds, destination)

    async def redrive_delivery(self, delivery_id: int, now: float) -> Delivery | None:
        if not await self._execute(self._q.REDRIVE_DELIVERY, now, delivery_id):
            return None
        return await self.get_delivery(delivery_id)

    async def mark_delivered(self, delivery_id: int, at: float, status: int) -> None:
        await self._execute(self._q.MARK_DELIVERED, at, status, delivery_id)

    async def mark_retry(
        self, delivery_id: int, next_attempt_at: float, status: int | None, error: str
    ) -> None:
        await self._execute(self._q.MARK_RETRY, next_attempt_at, status, error, delivery_id)

    async def mark_dead(self, delivery_id: int, at: float, status: int | None, error: str) -> None:
        await self._execute(self._q.MARK_DEAD, at, status, error, delivery_id)
