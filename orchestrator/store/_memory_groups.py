"""The in-memory store's groups: the same counters and decisions as the SQL stores'
(``sqlite_groups.py``), on plain objects."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

from orchestrator.errors import GroupSealed
from orchestrator.store import codec
from orchestrator.store.base import Finish, NewEvent, NewTracking, Tracking
from orchestrator.store.groups import (
    LISTED_MEMBERS,
    OUTCOMES,
    Group,
    GroupEnd,
    GroupEventFactory,
    GroupState,
    Member,
    SealGroup,
)
from orchestrator.vocabulary import TrackingState


class MemoryGroups:
    _trackings: dict[str, Tracking]
    _append_event: Callable[[NewEvent], None]  # MemoryLog's

    def __init__(self) -> None:
        super().__init__()
        self._groups: dict[str, Group] = {}

    def _check_joins(self, items: Sequence[NewTracking], created: set[str]) -> None:
        """GroupSealed before anything is written, as the SQL stores' rollback."""
        counts: dict[str, int] = {}
        for item in items:
            if item.group_name is not None and item.tracking_id in created:
                counts[item.group_name] = counts.get(item.group_name, 0) + 1
        for name, n in counts.items():
            g = self._groups.get(name)
            expect = next((i.group_expect for i in items if i.group_name == name), None)
            if g is not None:
                expect = g.expect or expect
            members = 0 if g is None else g.members
            ended = g is not None and (g.sealed_at is not None or g.outcome is not None)
            if ended or (expect is not None and members + n > expect):
                raise GroupSealed(name)

    def _join(self, items: Sequence[NewTracking], created: set[str]) -> None:
        for item in items:
            name = item.group_name
            if name is None or item.tracking_id not in created:
                continue
            g = self._groups.get(name) or self._new(name, item.created_at)
            g.expect = g.expect or item.group_expect
            g.members += 1
            if g.expect is not None and g.members >= g.expect and g.sealed_at is None:
                g.sealed_at = item.created_at
                g.traceparent, g.tracestate = item.traceparent, item.tracestate

    def _new(self, name: str, at: float) -> Group:
        counts = dict.fromkeys(OUTCOMES, 0)
        g = Group(name, at, None, None, None, 0, 0, counts, None, None, None, None)
        self._groups[name] = g
        return g

    def _seal(self, s: SealGroup, create: bool) -> Group | None:
        g = self._groups.get(s.name)
        if g is None and create:
            g = self._new(s.name, s.at)
        if g is None:
            return None
        if g.sealed_at is None:
            g.sealed_at, g.traceparent, g.tracestate = s.at, s.traceparent, s.tracestate
        if s.deadline_at is not None and g.outcome is None:
            g.deadline_at = s.deadline_at
        self._complete(g, s.at, s.event)
        return copy.deepcopy(g)

    def _count_end(self, item: Finish, name: str) -> None:
        g = self._groups[name]
        g.ended += 1
        g.outcomes[item.outcome] += 1
        at = item.terminal_at
        g.first_end_at = at if g.first_end_at is None else min(g.first_end_at, at)
        g.last_end_at = at if g.last_end_at is None else max(g.last_end_at, at)
        if item.group_event is not None:
            self._complete(g, at, item.group_event)

    def _complete(self, g: Group, at: float, event: GroupEventFactory) -> None:
        if g.outcome is None and g.sealed_at is not None and g.ended >= g.members:
            g.outcome, g.ended_at = "completed", at
            listed = self._members(g.name, TrackingState.TERMINAL)
            listed = [m for m in listed if m.outcome != "succeeded"][:LISTED_MEMBERS]
            self._append_event(event(GroupEnd(copy.deepcopy(g), listed)))

    def _members(self, name: str, state: TrackingState) -> list[Member]:
        found = [t for t in self._trackings.values() if t.group_name == name and t.state == state]
        found.sort(key=lambda t: ((t.terminal_at or 0.0), t.created_at, t.tracking_id))
        return [
            Member(t.tracking_id, t.workspace, t.kind, t.remote_id, t.outcome, t.remote_status,
                   copy.deepcopy(t.result))
            for t in found
        ]  # fmt: skip

    async def seal_group(self, seal: SealGroup) -> Group | None:
        return self._seal(seal, create=False)

    async def expire_groups(self, now: float, event: GroupEventFactory) -> list[Group]:
        ended = []
        for g in self._groups.values():
            if g.outcome is None and g.deadline_at is not None and g.deadline_at <= now:
                g.outcome, g.ended_at = "deadline_exceeded", now
                listed = self._members(g.name, TrackingState.ACTIVE)[:LISTED_MEMBERS]
                self._append_event(event(GroupEnd(copy.deepcopy(g), listed)))
                ended.append(copy.deepcopy(g))
        return ended

    async def get_group(self, name: str) -> Group | None:
        g = self._groups.get(name)
        return None if g is None else copy.deepcopy(g)

    async def list_groups(
        self, state: GroupState | None, limit: int, cursor: str | None
    ) -> tuple[list[Group], str | None]:
        after = None if cursor is None else str(codec.decode_cursor(cursor, (str,))[0])
        found = sorted(
            (g for g in self._groups.values() if state is None or g.state == state),
            key=lambda g: g.name,
        )
        found = [copy.deepcopy(g) for g in found if after is None or g.name > after]
        return codec.page(found, limit, lambda g: (g.name,))

    async def count_open_groups(self) -> int:
        return sum(1 for g in self._groups.values() if g.outcome is None)

    async def next_group_deadline(self) -> float | None:
        due = [g.deadline_at for g in self._groups.values() if g.outcome is None]
        return min((d for d in due if d is not None), default=None)
