"""Rows of the SQLite schema to the store's dataclasses and back (JSON as orjson bytes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from orchestrator.store.base import Delivery, EventRecord, NewTracking, Tracking
from orchestrator.vocabulary import Outcome, TrackingState

# Stored text back to members by a dict lookup, several times cheaper than calling
# the enum: a restart reads 100,000 rows.
_STATES = {s.value: s for s in TrackingState}
_OUTCOMES: dict[str | None, Outcome | None] = {None: None, **{o.value: o for o in Outcome}}


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
    )


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
