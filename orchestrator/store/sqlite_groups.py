"""The SQLite store's group writes, as plain functions of a connection, run in the
writer's group commit (see ``sqlite_writes.py``): a group's counters move in the
same transaction as its members' rows, and its one event is appended there too."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from orchestrator.errors import GroupSealed
from orchestrator.store import codec
from orchestrator.store import group_queries as gq
from orchestrator.store import sqlite_writes as ops
from orchestrator.store.base import Finish, NewEvent, NewTracking, Tracking
from orchestrator.store.groups import (
    LISTED_MEMBERS,
    Group,
    GroupEnd,
    GroupEventFactory,
    Member,
    SealGroup,
    group_row,
)


def join(conn: sqlite3.Connection, items: Sequence[NewTracking], created: set[str]) -> None:
    """Count the created items into their groups; GroupSealed (the caller's transaction
    rolls back) when one is sealed, ended or full."""
    joining: dict[str, list[NewTracking]] = {}
    for item in items:
        if item.group_name is not None and item.tracking_id in created:
            joining.setdefault(item.group_name, []).append(item)
    for name, members in joining.items():
        first = members[0]
        conn.execute(gq.ENSURE_GROUP, (name, first.created_at))
        expect = next((m.group_expect for m in members if m.group_expect), None)
        if expect is not None:
            conn.execute(gq.SET_EXPECT, (expect, name))
        row = conn.execute(gq.JOIN_GROUP, (len(members), name, len(members))).fetchone()
        if row is None:
            raise GroupSealed(name)
        count, expected = row
        if expected is not None and count >= expected:  # its last expected member came
            conn.execute(gq.SEAL, (first.created_at, first.traceparent, first.tracestate, name))


def seal(conn: sqlite3.Connection, s: SealGroup, create: bool) -> Group | None:
    """Seal ``s.name`` (``create``: an empty group is made first), and end it now if
    every member has ended. None: no such group."""
    if create:
        conn.execute(gq.ENSURE_GROUP, (s.name, s.at))
    conn.execute(gq.SEAL, (s.at, s.traceparent, s.tracestate, s.name))
    if s.deadline_at is not None:
        conn.execute(gq.SET_GROUP_DEADLINE, (s.deadline_at, s.name))
    complete(conn, s.name, s.at, s.event)
    row = conn.execute(gq.GROUP_BY_NAME, (s.name,)).fetchone()
    return None if row is None else group_row(row)


def complete(conn: sqlite3.Connection, name: str, at: float, event: GroupEventFactory) -> None:
    row = conn.execute(gq.COMPLETE, (at, name)).fetchone()
    if row is not None:
        group = group_row(row)
        _append(conn, GroupEnd(group, _members(conn, gq.NOT_SUCCEEDED, name)), event)


def expire(conn: sqlite3.Connection, now: float, event: GroupEventFactory) -> list[Group]:
    """Every group whose deadline has come before its end: ended as deadline_exceeded,
    each with its event naming the members still open."""
    ended = [group_row(row) for row in conn.execute(gq.EXPIRE, (now, now)).fetchall()]
    for group in ended:
        _append(conn, GroupEnd(group, _members(conn, gq.STILL_OPEN, group.name)), event)
    return ended


def _members(conn: sqlite3.Connection, sql: str, name: str) -> list[Member]:
    rows = conn.execute(sql, (name, LISTED_MEMBERS)).fetchall()
    return [member(row) for row in rows]


def member(row: Sequence[Any]) -> Member:
    tid, ws, kind, rid, outcome, status, result = row
    return Member(
        str(tid),
        str(ws),
        str(kind),
        str(rid),
        None if outcome is None else str(outcome),
        None if status is None else str(status),
        codec.load(result),
    )


def _append(conn: sqlite3.Connection, end: GroupEnd, event: GroupEventFactory) -> None:
    made = event(end)
    assert isinstance(made, NewEvent)
    ops.append_event(conn, made)


def create(
    conn: sqlite3.Connection, items: Sequence[NewTracking], sealing: SealGroup | None
) -> list[tuple[Tracking, bool]]:
    """Intake with its groups in one transaction: the trackings, their groups' counts,
    and the seal that came with them (a batch's or a follow-ups call's)."""
    out = ops.create_trackings(conn, items) if items else []
    join(conn, items, {t.tracking_id for t, new in out if new})
    if sealing is not None:
        seal(conn, sealing, create=True)
    return out


def grouped(conn: sqlite3.Connection, item: Finish, name: str) -> None:
    """``ops.finish``'s hook: a member's end counted, and its group ended if it was the
    last (a finish without an event factory is counted and decided at the next seal)."""
    conn.execute(gq.count_ends(item.outcome), (1, 1, *(item.terminal_at,) * 4, name))
    if item.group_event is not None:
        complete(conn, name, item.terminal_at, item.group_event)
