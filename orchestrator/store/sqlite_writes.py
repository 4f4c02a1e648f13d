"""The SQLite store's writes, as plain functions of a connection.

Each runs on the writer thread inside a group-commit transaction, under its own
savepoint (see ``group_commit.py``); none of them commits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from orchestrator.store import codec, queries
from orchestrator.store.base import (
    Delivery,
    Finish,
    NewEvent,
    NewTracking,
    PollUpdate,
    Tracking,
    WorkClassMerge,
    WorkClassSummary,
)


def create_trackings(
    conn: sqlite3.Connection, items: Sequence[NewTracking]
) -> list[tuple[Tracking, bool]]:
    # Rows go in a few multi-row statements, not one statement each: a statement
    # per row hands the GIL to the event loop and back once per row. Within a
    # statement rows are inserted in order, so a remote id given twice in one call
    # is created by its first item and found by the lookup below for the second.
    created: set[str] = set()
    size = queries.INSERT_ROWS
    for start in range(0, len(items), size):
        chunk = items[start : start + size]
        params = [v for item in chunk for v in codec.insert_tracking_params(item)]
        cursor = conn.execute(queries.insert_tracking_rows(len(chunk)), params)
        created.update(row[0] for row in cursor.fetchall())
    conn.executemany(queries.INSERT_LABEL, codec.label_rows(items, created))
    out: list[tuple[Tracking, bool]] = []
    for item in items:
        if item.tracking_id in created:
            out.append((codec.new_tracking(item), True))
        else:
            row = conn.execute(
                queries.TRACKING_BY_REMOTE, (item.workspace, item.kind, item.remote_id)
            ).fetchone()
            out.append((codec.tracking(row), False))
    return out


def record_polls(conn: sqlite3.Connection, updates: Sequence[PollUpdate]) -> None:
    plain: list[PollUpdate] = []
    for update in updates:
        if update.event is None:
            plain.append(update)
            continue
        # An update carrying an event needs to know whether the row was still active; the
        # plain ones before it are written first so that updates apply in the order given.
        _record_plain(conn, plain)
        plain = []
        row = codec.poll_row(update)[:12]
        if conn.execute(queries.record_poll_rows(1), row).rowcount:
            append_event(conn, update.event)
    _record_plain(conn, plain)
    deadlines = [(*u.deadline, u.tracking_id) for u in updates if u.deadline is not None]
    conn.executemany(queries.SET_DEADLINE, deadlines)


def _record_plain(conn: sqlite3.Connection, updates: Sequence[PollUpdate]) -> None:
    """Updates without events, each tracking's folded into one row, in bulk statements."""
    folded = [row[:12] for row in codec.fold_polls(updates)]
    size = queries.POLL_ROWS
    for start in range(0, len(folded), size):
        chunk = folded[start : start + size]
        conn.execute(queries.record_poll_rows(len(chunk)), [v for row in chunk for v in row])


def finish(
    conn: sqlite3.Connection,
    items: Sequence[Finish],
    grouped: Callable[[sqlite3.Connection, Finish, str], None] | None = None,
) -> list[bool]:
    """``grouped``: called, after its event, for each moved tracking in a group."""
    out: list[bool] = []
    for item in items:
        row = conn.execute(queries.FINISH_TRACKING, codec.finish_row(item)).fetchone()
        if row is not None:
            append_event(conn, item.event)
            if row[0] is not None and grouped is not None:
                grouped(conn, item, row[0])
        out.append(row is not None)
    return out


def append_event(conn: sqlite3.Connection, event: NewEvent) -> int:
    cursor = conn.execute(
        queries.INSERT_EVENT,
        (event.event_id, event.tracking_id, event.type, event.time, event.payload, event.sink),
    )
    seq = cursor.lastrowid
    assert seq is not None
    conn.executemany(
        queries.INSERT_DELIVERY,
        [
            (seq, dest, event.callback_url if dest == "callback" else None, event.time, event.time)
            for dest in dict.fromkeys(event.destinations)
        ],
    )
    return seq


def claim_deliveries(
    conn: sqlite3.Connection, destination: str, now: float, limit: int, lease_s: float
) -> list[Delivery]:
    rows = conn.execute(queries.DUE_DELIVERIES, (destination, now, max(0, limit))).fetchall()
    claimed = [codec.delivery(row) for row in rows]
    for item in claimed:
        item.next_attempt_at = now + lease_s
    conn.executemany(
        queries.LEASE_DELIVERY, [(item.next_attempt_at, item.delivery_id) for item in claimed]
    )
    return claimed


def execute(conn: sqlite3.Connection, sql: str, params: Sequence[object]) -> int:
    """One statement; returns the rows it changed."""
    return int(conn.execute(sql, params).rowcount)


def prune(conn: sqlite3.Connection, before: float, batch: int) -> int:
    ids = conn.execute(queries.PRUNABLE_TRACKINGS, (before, max(0, batch))).fetchall()
    conn.executemany(queries.DELETE_TRACKING, ids)
    seqs = conn.execute(queries.PRUNABLE_SINK_EVENTS, (before, max(0, batch))).fetchall()
    conn.executemany(queries.DELETE_EVENT, seqs)
    return len(ids) + len(seqs)


def change_sink(
    conn: sqlite3.Connection, sql: str, params: Sequence[object], event: NewEvent
) -> bool:
    """A sink's state changed by ``sql`` with its operational event, or nothing written
    (False) when ``sql`` changed nothing."""
    changed = conn.execute(sql, params).rowcount > 0
    if changed:
        append_event(conn, event)
    return changed


def merge_work_classes(
    conn: sqlite3.Connection,
    merges: Sequence[WorkClassMerge],
    forget: Sequence[tuple[str, str, str]],
) -> list[WorkClassSummary]:
    # The writer's one connection serialises this read-modify-write: no lock needed.
    conn.executemany(queries.FORGET_WORK_CLASS, forget)
    stored: list[WorkClassSummary] = []
    for m in merges:
        row = conn.execute(queries.WORK_CLASS, m.key).fetchone()
        item = m.folded(None if row is None else codec.load(row[0]))
        conn.execute(
            queries.SAVE_WORK_CLASS,
            (*m.key, codec.dump(item.summary), item.updated_at),
        )
        stored.append(item)
    return stored
