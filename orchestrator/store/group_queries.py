"""The groups' SQL, in SQLite's dialect (``pg_queries.numbered`` makes PostgreSQL's),
and the group reads both SQL stores share.

Every statement is portable between the two (no min/max of two values, which
the dialects spell differently): the placeholders are plain ``?``, in order.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from orchestrator.store.codec import decode_cursor, page
from orchestrator.store.groups import GROUP_COLUMNS, OUTCOMES, Group, GroupState, group_row

ENSURE_GROUP = (
    "INSERT INTO tracking_groups (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING"
)
# The first expect given stands.
SET_EXPECT = "UPDATE tracking_groups SET expect = ? WHERE name = ? AND expect IS NULL"
# New members, refused (no row) once sealed, ended or beyond expect: name, n, n.
JOIN_GROUP = (
    "UPDATE tracking_groups SET members = members + ?"
    " WHERE name = ? AND sealed_at IS NULL AND outcome IS NULL"
    " AND (expect IS NULL OR members + ? <= expect) RETURNING members, expect"
)
# A seal (at, traceparent, tracestate, name): the first one's time and trace stand.
SEAL = (
    "UPDATE tracking_groups SET sealed_at = ?, traceparent = ?, tracestate = ?"
    " WHERE name = ? AND sealed_at IS NULL"
)
SET_GROUP_DEADLINE = "UPDATE tracking_groups SET deadline_at = ? WHERE name = ? AND outcome IS NULL"
GROUP_BY_NAME = f"SELECT {GROUP_COLUMNS} FROM tracking_groups WHERE name = ?"
# The one decision that a sealed group has ended (at, name): only the first succeeds.
COMPLETE = (
    "UPDATE tracking_groups SET outcome = 'completed', ended_at = ?"
    " WHERE name = ? AND outcome IS NULL AND sealed_at IS NOT NULL AND ended >= members"
    f" RETURNING {GROUP_COLUMNS}"
)
# Groups whose deadline has come with members still open (at, now).
EXPIRE = (
    "UPDATE tracking_groups SET outcome = 'deadline_exceeded', ended_at = ?"
    " WHERE outcome IS NULL AND deadline_at IS NOT NULL AND deadline_at <= ?"
    f" RETURNING {GROUP_COLUMNS}"
)
COUNT_OPEN = "SELECT count(*) FROM tracking_groups WHERE outcome IS NULL"
NEXT_DEADLINE = (
    "SELECT min(deadline_at) FROM tracking_groups WHERE outcome IS NULL AND deadline_at IS NOT NULL"
)
_MEMBER = "tracking_id, workspace, kind, remote_id, outcome, remote_status, result"
# The members a group event names (name, limit).
NOT_SUCCEEDED = (
    f"SELECT {_MEMBER} FROM trackings WHERE group_name = ? AND state = 'terminal'"
    " AND outcome <> 'succeeded' ORDER BY terminal_at, tracking_id LIMIT ?"
)
STILL_OPEN = (
    f"SELECT {_MEMBER} FROM trackings WHERE group_name = ? AND state = 'active'"
    " ORDER BY created_at, tracking_id LIMIT ?"
)


@functools.cache
def count_ends(outcome: str) -> str:
    """Members' ends of one outcome counted (n x2, first end x2, last end x2, name)."""
    if outcome not in OUTCOMES:
        raise ValueError(outcome)
    return (
        f"UPDATE tracking_groups SET ended = ended + ?, {outcome} = {outcome} + ?,"
        " first_end_at = CASE WHEN first_end_at IS NULL OR first_end_at > ? THEN ?"
        "   ELSE first_end_at END,"
        " last_end_at = CASE WHEN last_end_at IS NULL OR last_end_at < ? THEN ?"
        "   ELSE last_end_at END"
        " WHERE name = ?"
    )


_STATE_WHERE = {
    "open": "sealed_at IS NULL AND outcome IS NULL",
    "sealed": "sealed_at IS NOT NULL AND outcome IS NULL",
    "completed": "outcome = 'completed'",
    "deadline_exceeded": "outcome = 'deadline_exceeded'",
}


@functools.cache
def list_groups(state: str | None, after: bool) -> str:
    """A page of groups by name (parameters: the cursor's name, if any; limit)."""
    where = [_STATE_WHERE[state]] if state is not None else []
    if after:
        where.append("name > ?")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT {GROUP_COLUMNS} FROM tracking_groups{clause} ORDER BY name LIMIT ?"


class SqlGroupReads:
    """The SQL stores' group reads; ``_sql`` turns a statement of ``group_queries`` into
    the backend's dialect."""

    _fetch: Callable[..., Awaitable[list[Any]]]
    _sql: Callable[[str], str]

    async def get_group(self, name: str) -> Group | None:
        rows = await self._fetch(self._sql(GROUP_BY_NAME), name)
        return group_row(rows[0]) if rows else None

    async def list_groups(
        self, state: GroupState | None, limit: int, cursor: str | None
    ) -> tuple[list[Group], str | None]:
        """A page of groups by name, and the next page's cursor (ValueError: a bad one)."""
        params: list[Any] = []
        if cursor is not None:
            params.append(str(decode_cursor(cursor, (str,))[0]))
        sql = self._sql(list_groups(state, cursor is not None))
        rows = await self._fetch(sql, *params, limit + 1)
        return page([group_row(r) for r in rows], limit, lambda g: (g.name,))

    async def count_open_groups(self) -> int:
        rows = await self._fetch(self._sql(COUNT_OPEN))
        return int(rows[0][0])

    async def next_group_deadline(self) -> float | None:
        """The soonest deadline of a group still waiting for its event."""
        rows = await self._fetch(self._sql(NEXT_DEADLINE))
        return None if not rows or rows[0][0] is None else float(rows[0][0])
