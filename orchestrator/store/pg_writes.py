"""The PostgreSQL store's writes of trackings and events, as functions of one connection.

Poll results and terminal writes, with their events, are one statement each (its
own transaction: no lock is held across a round trip, which a slow link would
stretch); the others run inside a transaction their caller opened. Poll results
and terminal writes carry the fencing token of the lease this replica holds
(``LeaseBook``); the statements themselves refuse a write whose lease has passed
or moved, so a replica that stalled past its lease cannot overwrite its
successor's work.

Event order: every transaction that appends events takes one transaction-level
advisory lock before its first seq is assigned and holds it to commit.
PostgreSQL hands out identity values in call order but commits in any order, so
without it a reader following ``after=SEQ`` could pass seq 11 (committed) while
seq 10 is still being written, and never see 10. Under the lock the next writer
gets its seq only once the previous writer is committed and visible: seq order
is commit order, and every snapshot sees a prefix of the log.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrator.store import codec
from orchestrator.store import pg_queries as q
from orchestrator.store.base import (
    DisabledSink,
    Finish,
    NewEvent,
    NewTracking,
    PollUpdate,
    Tracking,
    WorkClassMerge,
    WorkClassSummary,
)
from orchestrator.store.leases import LeaseBook

Connection = Any  # asyncpg.Connection: asyncpg ships no type information


def _event_columns(events: Sequence[tuple[NewEvent, bool]]) -> list[list[Any]]:
    """Events (with whether each is terminal) as INSERT_EVENTS's ten arrays: the
    events', then their deliveries' (event id, destination, URL)."""
    rows = [(e.event_id, e.tracking_id, e.type, e.time, e.payload, t, e.sink) for e, t in events]
    to = [
        (e.event_id, d, e.callback_url if d == "callback" else None)
        for e, _ in events
        for d in dict.fromkeys(e.destinations)
    ]
    return _columns(rows, 7) + _columns(to, 3)


def _columns(rows: Sequence[Sequence[Any]], width: int) -> list[list[Any]]:
    """Rows as the column arrays an unnest takes (empty arrays for no rows)."""
    return [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in range(width)]


async def append_events(conn: Connection, events: Sequence[NewEvent]) -> None:
    """Events no tracking write carries (a sink's change), appended under the log's
    lock within the caller's transaction."""
    await conn.execute(q.LOCK_EVENTS)
    await conn.execute(q.INSERT_EVENTS, *_event_columns([(e, False) for e in events]))


async def create_trackings(
    conn: Connection, items: Sequence[NewTracking], owner: str, lease_s: float, book: LeaseBook
) -> tuple[list[tuple[Tracking, bool]], dict[str, int]]:
    """Insert (leased to ``owner``); returns the answers and the new leases."""
    params = [codec.insert_tracking_params(item) for item in items]
    columns = [list(column) for column in zip(*params, strict=True)]
    rows = await conn.fetch(q.INSERT_TRACKINGS, *columns, owner, lease_s)
    leases = {row[0]: int(row[1]) for row in rows}
    labels = codec.label_rows(items, leases)
    if labels:
        await conn.execute(q.INSERT_LABELS, *(list(c) for c in zip(*labels, strict=True)))
    known = [item for item in items if item.tracking_id not in leases]
    existing: dict[tuple[str, str, str], Tracking] = {}
    if known:
        keys = [[i.workspace for i in known], [i.kind for i in known], [i.remote_id for i in known]]
        for row in await conn.fetch(q.TRACKINGS_BY_REMOTE, *keys):
            existing[row[1], row[2], row[3]] = codec.tracking(row)
    out: list[tuple[Tracking, bool]] = []
    for item in items:
        if item.tracking_id in leases:
            out.append((codec.new_tracking(item), True))
        else:
            out.append((existing[item.workspace, item.kind, item.remote_id], False))
    return out, leases


def _poll_row(u: PollUpdate, token: int) -> list[Any]:
    changed = u.remote_changed
    deadline, source = u.deadline if u.deadline is not None else (None, None)
    return [
        u.tracking_id, token, u.polls, u.last_polled_at, u.next_poll_at,
        codec.dump(u.last_error), changed,
        u.remote_status if changed else None,
        codec.dump(u.remote) if changed else None,
        u.fingerprint if changed else None,
        u.digest if changed else None,
        deadline, source,
        u.work_class, u.work_started_at,
    ]  # fmt: skip


async def record_polls(conn: Connection, updates: Sequence[PollUpdate], book: LeaseBook) -> None:
    """Poll results of the trackings this replica holds (others are not even sent),
    each tracking's folded into one row, with the events of the rows that moved: one
    statement, whatever the batch holds."""
    rows: dict[str, list[Any]] = {}
    events: list[tuple[NewEvent, bool]] = []
    for u in updates:
        token = book.tokens.get(u.tracking_id)
        if token is not None:
            _fold(rows, u, token)
            if u.event is not None:
                events.append((u.event, False))
    if not rows:
        return
    columns = _columns(list(rows.values()), 15)
    if events:
        await conn.fetch(q.RECORD_POLLS_EVENTS, *columns, *_event_columns(events))
    else:
        await conn.execute(q.RECORD_POLLS, *columns)


def _fold(rows: dict[str, list[Any]], u: PollUpdate, token: int) -> None:
    """A tracking's updates folded into one row that leaves it as applying them in turn
    would: the last update's counters and error, the last changed body, the last
    derived deadline, the last class of the work."""
    row = rows.get(u.tracking_id)
    fresh = _poll_row(u, token)
    if row is None:
        rows[u.tracking_id] = fresh
        return
    row[2:6] = fresh[2:6]
    if u.remote_changed:
        row[6:11] = fresh[6:11]
    if u.deadline is not None:
        row[11:13] = fresh[11:13]
    if u.work_class is not None:
        row[13:15] = fresh[13:15]


async def finish(conn: Connection, items: Sequence[Finish], book: LeaseBook) -> list[bool]:
    """Terminal writes with their events in one statement: a held tracking's fenced by
    its lease, an abandon of one this replica does not hold unfenced, any other not
    ours to end (its holder will). Only the first write of a tracking counts."""
    rows: dict[str, list[Any]] = {}
    events: list[tuple[NewEvent, bool]] = []
    for item in items:
        token = book.tokens.get(item.tracking_id)
        if item.tracking_id in rows or (token is None and item.outcome != "abandoned"):
            continue
        rows[item.tracking_id] = [
            item.tracking_id, item.outcome, item.terminal_at, codec.dump(item.result),
            item.polls, item.last_polled_at, codec.dump(item.last_error), item.remote_changed,
            item.remote_status if item.remote_changed else None,
            codec.dump(item.remote) if item.remote_changed else None,
            token,
        ]  # fmt: skip
        events.append((item.event, True))
    moved: set[str] = set()
    if rows:
        columns = _columns(list(rows.values()), 11)
        found = await conn.fetch(q.FINISH, *columns, *_event_columns(events))
        moved = {row[0] for row in found}
    out: list[bool] = []
    for item in items:
        out.append(item.tracking_id in moved)
        moved.discard(item.tracking_id)  # a second write of it in the batch did nothing
    return out


async def disable_sink(conn: Connection, sink: DisabledSink, event: NewEvent) -> bool:
    """The disabled state and its operational event, or nothing if already disabled."""
    status = await conn.execute(q.DISABLE_SINK, sink.destination, sink.since, sink.reason)
    if status != "INSERT 0 1":
        return False
    await _sink_changed(conn, event)
    return True


async def enable_sink(conn: Connection, destination: str, event: NewEvent) -> bool:
    """The disabled state cleared with its operational event, or nothing if not disabled."""
    if await conn.execute(q.ENABLE_SINK, destination) != "DELETE 1":
        return False
    await _sink_changed(conn, event)
    return True


async def _sink_changed(conn: Connection, event: NewEvent) -> None:
    """The operational event of a sink's change, and word of it to the other replicas."""
    await append_events(conn, [event])
    await conn.execute(q.NOTIFY, q.CHANNEL, "sinks")  # the other replicas adopt it


async def merge_work_classes(conn: Any, merges: Sequence[WorkClassMerge]) -> list[WorkClassSummary]:
    """Each merge folded into its row, the rows locked to commit: a peer's merge of the
    same class waits and then folds into this one's result."""
    ordered = sorted(merges, key=lambda m: m.key)  # one lock order for every replica
    keys = (
        [m.workspace for m in ordered],
        [m.kind for m in ordered],
        [m.work_class for m in ordered],
    )
    rows = await conn.fetch(q.LOCK_WORK_CLASSES, *keys, [m.updated_at for m in ordered])
    stored: dict[tuple[str, str, str], bytes] = {(r[0], r[1], r[2]): r[3] for r in rows}
    items = [m.folded(codec.load(stored[m.key]) if stored.get(m.key) else None) for m in ordered]
    summaries = [codec.dump(i.summary) for i in items]
    await conn.execute(q.SAVE_WORK_CLASSES, *keys, summaries, [i.updated_at for i in items])
    return items
