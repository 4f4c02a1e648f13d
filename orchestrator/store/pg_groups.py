"""The PostgreSQL store's group writes, each on a connection inside the caller's
transaction (as ``sqlite_groups.py`` on SQLite's writer).

Lock order: the event log's advisory lock before any group row, in every
transaction that may append a group event (a finish takes it in its first
statement); intake without a seal locks group rows only, in name order. So a
seal and a member's end cannot wait for each other, and of two transactions
deciding one group's end, the second sees the first's outcome and does nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from orchestrator.errors import GroupSealed
from orchestrator.store import group_queries as gq
from orchestrator.store import pg_queries as q
from orchestrator.store.base import NewEvent, NewTracking
from orchestrator.store.groups import (
    LISTED_MEMBERS,
    Group,
    GroupEnd,
    GroupEventFactory,
    SealGroup,
    group_row,
)
from orchestrator.store.sqlite_groups import member

ENSURE_GROUP = q.numbered(gq.ENSURE_GROUP)
SET_EXPECT = q.numbered(gq.SET_EXPECT)
JOIN_GROUP = q.numbered(gq.JOIN_GROUP)
SEAL = q.numbered(gq.SEAL)
SET_GROUP_DEADLINE = q.numbered(gq.SET_GROUP_DEADLINE)
GROUP_BY_NAME = q.numbered(gq.GROUP_BY_NAME)
COMPLETE = q.numbered(gq.COMPLETE)
EXPIRE = q.numbered(gq.EXPIRE)
NOT_SUCCEEDED = q.numbered(gq.NOT_SUCCEEDED)
STILL_OPEN = q.numbered(gq.STILL_OPEN)


async def join(conn: Any, items: Sequence[NewTracking], created: set[str]) -> None:
    """As ``sqlite_groups.join``; GroupSealed rolls the caller's transaction back."""
    joining: dict[str, list[NewTracking]] = {}
    for item in items:
        if item.group_name is not None and item.tracking_id in created:
            joining.setdefault(item.group_name, []).append(item)
    for name in sorted(joining):
        members = joining[name]
        first = members[0]
        await conn.execute(ENSURE_GROUP, name, first.created_at)
        expect = next((m.group_expect for m in members if m.group_expect), None)
        if expect is not None:
            await conn.execute(SET_EXPECT, expect, name)
        row = await conn.fetchrow(JOIN_GROUP, len(members), name, len(members))
        if row is None:
            raise GroupSealed(name)
        if row[1] is not None and row[0] >= row[1]:  # its last expected member came
            await conn.execute(SEAL, first.created_at, first.traceparent, first.tracestate, name)


async def seal(conn: Any, s: SealGroup, create: bool) -> Group | None:
    await conn.execute(q.LOCK_EVENTS)
    if create:
        await conn.execute(ENSURE_GROUP, s.name, s.at)
    await conn.execute(SEAL, s.at, s.traceparent, s.tracestate, s.name)
    if s.deadline_at is not None:
        await conn.execute(SET_GROUP_DEADLINE, s.deadline_at, s.name)
    await complete(conn, s.name, s.at, s.event)
    row = await conn.fetchrow(GROUP_BY_NAME, s.name)
    return None if row is None else group_row(row)


async def count_ends(conn: Any, ended: Sequence[tuple[str, str, float]]) -> None:
    """Members' ends (group, outcome, at): one statement per group and outcome, in
    group order (the rows' lock order)."""
    counted: dict[tuple[str, str], tuple[int, float, float]] = {}
    for name, outcome, at in ended:
        n, first, last = counted.get((name, outcome), (0, at, at))
        counted[name, outcome] = (n + 1, min(first, at), max(last, at))
    for (name, outcome), (n, first, last) in sorted(counted.items()):
        await conn.execute(q.numbered(gq.count_ends(outcome)), n, n, first, first, last, last, name)


async def complete(conn: Any, name: str, at: float, event: GroupEventFactory) -> None:
    row = await conn.fetchrow(COMPLETE, at, name)
    if row is not None:
        rows = await conn.fetch(NOT_SUCCEEDED, name, LISTED_MEMBERS)
        await _append(conn, [event(GroupEnd(group_row(row), [member(r) for r in rows]))])


async def expire(conn: Any, now: float, event: GroupEventFactory) -> list[Group]:
    await conn.execute(q.LOCK_EVENTS)
    ended = [group_row(row) for row in await conn.fetch(EXPIRE, now, now)]
    made = []
    for group in ended:
        rows = await conn.fetch(STILL_OPEN, group.name, LISTED_MEMBERS)
        made.append(event(GroupEnd(group, [member(r) for r in rows])))
    await _append(conn, made)
    return ended


async def _append(conn: Any, events: Sequence[Any]) -> None:
    if not events:
        return
    assert all(isinstance(e, NewEvent) for e in events)
    rows = [(e.event_id, e.tracking_id, e.type, e.time, e.payload, False, e.sink) for e in events]
    to = [(e.event_id, d, None) for e in events for d in dict.fromkeys(e.destinations)]
    columns = [list(c) for c in zip(*rows, strict=True)]
    targets = [list(c) for c in zip(*to, strict=True)] if to else [[], [], []]
    await conn.execute(q.INSERT_EVENTS, *columns, *targets)
