"""How the store's dataclasses are encoded, alike in every backend.

As rows of the SQL schemas (``queries.py``, ``pg_queries.py``), JSON as orjson
bytes; a listing as the parameters its query takes; a place in a listing as an
opaque cursor, and a page size as a clamped limit, so that paging behaves the
same on memory, SQLite and PostgreSQL.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Container, Sequence
from typing import Any, NamedTuple

import orjson

from orchestrator.errors import StoreError
from orchestrator.store.base import (
    Delivery,
    DeliveryState,
    EventRecord,
    NewTracking,
    Tracking,
    TrackingQuery,
)
from orchestrator.vocabulary import Outcome, TrackingState

MAX_PAGE = 1000

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


def tracking(row: Sequence[Any]) -> Tracking:
    """A row of ``queries.TRACKING_COLUMNS``."""
    return Tracking(
        tracking_id=row[0],
        workspace=row[1],
        kind=row[2],
        remote_id=row[3],
        state=_STATES[row[4]],
        outcome=_OUTCOMES[row[5]],
        remote_status=row[6],
        remote=load(row[7]),
        result=load(row[8]),
        polls=row[9],
        last_polled_at=row[10],
        next_poll_at=row[11],
        last_error=load(row[12]),
        deadline_at=row[13],
        created_at=row[14],
        terminal_at=row[15],
        labels=load(row[16]) or {},
        correlation_id=row[17],
        callback_url=row[18],
        notify=row[19],
        remote_fingerprint=row[20],
        remote_digest=row[21],
        deadline_source=row[22],
        work_class=row[23],
        work_started_at=row[24],
        traceparent=row[25],
        tracestate=row[26],
    )


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
        None if item.remote is None else dump(item.remote),
        item.work_class,
        item.traceparent,
        item.tracestate,
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
    """A row of ``queries.DELIVERY_COLUMNS``."""
    return Delivery(
        delivery_id=row[0],
        event_seq=row[1],
        event_id=row[2],
        destination=row[3],
        url=row[4],
        state=row[5],
        attempts=row[6],
        next_attempt_at=row[7],
        created_at=row[8],
        event_time=row[9],
        payload=bytes(row[10]),
        last_status=row[11],
        last_error=row[12],
        delivered_at=row[13],
    )


def event(row: Sequence[Any]) -> EventRecord:
    """A row of ``queries.EVENT_COLUMNS``."""
    return EventRecord(
        seq=row[0],
        event_id=row[1],
        tracking_id=row[2],
        type=row[3],
        time=row[4],
        payload=bytes(row[5]),
        sink=row[6],
    )


# -- listings of the SQL backends -----------------------------------------------------


class Shape(NamedTuple):
    """Which filters a listing has: the keyword arguments of ``list_trackings``."""

    state: bool
    kind: bool
    outcome: bool
    workspace: bool
    labels: int
    after: bool


def listing(query: TrackingQuery) -> tuple[Shape, list[Any]]:
    """The query's shape and its parameters, in the order ``queries.list_trackings``
    and ``pg_queries.list_trackings`` expect (the limit, last, is the caller's)."""
    params: list[Any] = [
        value
        for value in (query.state, query.kind, query.outcome, query.workspace)
        if value is not None
    ]
    for pair in sorted(query.labels.items()):
        params.extend(pair)
    if query.cursor is not None:
        created_at, tracking_id = decode_cursor(query.cursor, (float, str))
        params.extend((created_at, created_at, tracking_id))
    shape = Shape(
        state=query.state is not None,
        kind=query.kind is not None,
        outcome=query.outcome is not None,
        workspace=query.workspace is not None,
        labels=len(query.labels),
        after=query.cursor is not None,
    )
    return shape, params


def page(rows: Sequence[Any], limit: int) -> tuple[list[Tracking], str | None]:
    """The tracking rows read with ``limit + 1`` as one page, and the cursor to the next."""
    items = [tracking(row) for row in rows[:limit]]
    more = len(rows) > limit
    return items, encode_cursor(items[-1].created_at, items[-1].tracking_id) if more else None


def delivery_listing(state: DeliveryState | None, cursor: str | None) -> list[Any]:
    """A delivery listing's parameters: those of ``DELIVERIES_ALL`` when ``state`` is
    None, else of ``DELIVERIES_BY_STATE`` (the limit, last, is the caller's)."""
    after = decode_cursor(cursor, (int,))[0] if cursor is not None else 0
    return [after] if state is None else [state, after]


def delivery_page(rows: Sequence[Any], limit: int) -> tuple[list[Delivery], str | None]:
    """The delivery rows read with ``limit + 1`` as one page, and the cursor to the next."""
    items = [delivery(row) for row in rows[:limit]]
    return items, encode_cursor(items[-1].delivery_id) if len(rows) > limit else None
