"""What the SQL backends share of a tracking listing: its parameters, in the order
``queries.list_trackings`` and ``pg_queries.list_trackings`` expect, and its page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from orchestrator.store import _rows
from orchestrator.store._paging import decode_cursor, encode_cursor
from orchestrator.store.base import Tracking, TrackingQuery


class Shape(NamedTuple):
    """Which filters a listing has: the keyword arguments of ``list_trackings``."""

    state: bool
    kind: bool
    outcome: bool
    workspace: bool
    labels: int
    after: bool


def listing(query: TrackingQuery) -> tuple[Shape, list[Any]]:
    """The query's shape and its parameters (the limit, last, is the caller's)."""
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
    """The rows read with ``limit + 1`` as one page, and the cursor to the next."""
    items = [_rows.tracking(row) for row in rows[:limit]]
    more = len(rows) > limit
    return items, encode_cursor(items[-1].created_at, items[-1].tracking_id) if more else None
