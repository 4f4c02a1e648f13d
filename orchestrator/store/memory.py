"""The store in memory: the same semantics as SQLite, no I/O, for fast tests of the engine.

Every call is atomic (it checks before it changes anything) and returns copies,
so a caller cannot alter stored state by mutating what it got back. Setting
``writable = False`` makes every write raise StoreUnavailable, as a full disk
would.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import AsyncGenerator, Sequence

from orchestrator.errors import StoreError
from orchestrator.store import codec
from orchestrator.store._memory_groups import MemoryGroups
from orchestrator.store._memory_log import MemoryLog
from orchestrator.store.base import (
    Finish,
    NewTracking,
    PollUpdate,
    Store,
    Tracking,
    TrackingQuery,
    WorkClassMerge,
    WorkClassSummary,
    paged_active,
)
from orchestrator.store.groups import SealGroup
from orchestrator.vocabulary import TrackingState


class MemoryStore(MemoryGroups, MemoryLog, Store):
    shares_work = False

    def __init__(self) -> None:
        super().__init__()
        self._trackings: dict[str, Tracking] = {}
        self._by_remote: dict[tuple[str, str, str], str] = {}
        self._work_classes: dict[tuple[str, str, str], WorkClassSummary] = {}

    # -- trackings ----------------------------------------------------------------------

    async def create_trackings(
        self, items: Sequence[NewTracking], seal: SealGroup | None = None
    ) -> list[tuple[Tracking, bool]]:
        self._write()
        staged: dict[tuple[str, str, str], Tracking] = {}
        answers: list[tuple[tuple[str, str, str], bool]] = []
        taken: set[str] = set()
        for item in items:
            key = (item.workspace, item.kind, item.remote_id)
            if key in self._by_remote or key in staged:
                answers.append((key, False))
                continue
            if item.tracking_id in self._trackings or item.tracking_id in taken:
                raise StoreError(f"tracking_id {item.tracking_id} already exists")
            taken.add(item.tracking_id)
            staged[key] = codec.new_tracking(copy.deepcopy(item))
            answers.append((key, True))
        created = {t.tracking_id for t in staged.values()}
        self._check_joins(items, created)
        for key, tracking in staged.items():
            self._trackings[tracking.tracking_id] = tracking
            self._by_remote[key] = tracking.tracking_id
        self._join(items, created)
        if seal is not None:
            self._seal(seal, create=True)
        return [(copy.deepcopy(self._trackings[self._by_remote[k]]), new) for k, new in answers]

    async def get_tracking(self, tracking_id: str) -> Tracking | None:
        self._read()
        found = self._trackings.get(tracking_id)
        return copy.deepcopy(found) if found else None

    async def active_counts(self) -> dict[str, int]:
        self._read()
        active = (t for t in self._trackings.values() if t.state == TrackingState.ACTIVE)
        return dict(Counter(t.workspace for t in active))

    def active_chunks(self, size: int) -> AsyncGenerator[list[Tracking], None]:
        return paged_active(self, size)

    async def load_active(
        self, after: str | None = None, limit: int | None = None
    ) -> list[Tracking]:
        self._read()
        rows = sorted(
            (
                t
                for t in self._trackings.values()
                if t.state == TrackingState.ACTIVE and (after is None or t.tracking_id > after)
            ),
            key=lambda t: t.tracking_id,
        )
        out = [copy.deepcopy(t) for t in rows[:limit]]
        for t in out:
            if t.remote_digest is not None:
                t.remote = None  # as the SQLite store: the digest stands for the body
        return out

    async def list_trackings(self, query: TrackingQuery) -> tuple[list[Tracking], str | None]:
        self._read()
        after = (
            codec.decode_cursor(query.cursor, (float, str)) if query.cursor is not None else None
        )
        rows = sorted(
            (t for t in self._trackings.values() if _matches(t, query, after)),
            key=codec.tracking_key,
            reverse=True,
        )
        items, cursor = codec.page(rows, codec.clamp_limit(query.limit), codec.tracking_key)
        return [copy.deepcopy(t) for t in items], cursor

    async def record_polls(self, updates: Sequence[PollUpdate]) -> None:
        self._write()
        live = [u for u in updates if self._is_active(u.tracking_id)]
        self._check_new_events(u.event for u in live)
        for update in live:
            tracking = self._trackings[update.tracking_id]
            tracking.polls = update.polls
            tracking.last_polled_at = update.last_polled_at
            tracking.next_poll_at = update.next_poll_at
            tracking.last_error = copy.deepcopy(update.last_error)
            if update.remote_changed:
                tracking.remote_status = update.remote_status
                tracking.remote = copy.deepcopy(update.remote)
                tracking.remote_fingerprint = update.fingerprint
                tracking.remote_digest = update.digest
            if update.deadline is not None:
                tracking.deadline_at, tracking.deadline_source = update.deadline
            if update.work_class is not None:
                tracking.work_class = update.work_class
            if update.work_started_at is not None:
                tracking.work_started_at = update.work_started_at
            if update.event is not None:
                self._append_event(update.event)

    async def finish(self, items: Sequence[Finish]) -> list[bool]:
        self._write()
        first: dict[str, int] = {}  # the item that moves each active tracking: its first
        for i, item in enumerate(items):
            if self._is_active(item.tracking_id):
                first.setdefault(item.tracking_id, i)
        finishing = [items[i] for i in first.values()]
        self._check_new_events(item.event for item in finishing)
        for item in finishing:
            tracking = self._trackings[item.tracking_id]
            tracking.state = TrackingState.TERMINAL
            tracking.outcome = item.outcome
            tracking.terminal_at = item.terminal_at
            tracking.result = copy.deepcopy(item.result)
            tracking.next_poll_at = None
            if item.polls is not None:
                tracking.polls = item.polls
            if item.polls is not None or item.last_error is not None:
                tracking.last_error = copy.deepcopy(item.last_error)
            if item.last_polled_at is not None:
                tracking.last_polled_at = item.last_polled_at
            if item.remote_changed:
                tracking.remote_status = item.remote_status
                tracking.remote = copy.deepcopy(item.remote)
            self._append_event(item.event)
            if tracking.group_name is not None:
                self._count_end(item, tracking.group_name)
        return [first.get(item.tracking_id) == i for i, item in enumerate(items)]

    async def prune(self, before: float, batch: int) -> int:
        self._write()
        pending = {d.event_seq for d in self._deliveries.values() if d.state == "pending"}
        pending_trackings = {self._events[seq].tracking_id for seq in pending}
        doomed = sorted(
            (
                t
                for t in self._trackings.values()
                if t.state == TrackingState.TERMINAL
                and t.terminal_at is not None
                and t.terminal_at < before
                and t.tracking_id not in pending_trackings
            ),
            key=lambda t: t.terminal_at or 0.0,
        )[: max(0, batch)]
        ids = {t.tracking_id for t in doomed}
        seqs = {seq for seq, e in self._events.items() if e.tracking_id in ids}
        operational = sorted(
            seq
            for seq, e in self._events.items()
            if e.tracking_id is None and e.time < before and seq not in pending
        )[: max(0, batch)]
        seqs.update(operational)
        for t in doomed:
            del self._trackings[t.tracking_id]
            del self._by_remote[(t.workspace, t.kind, t.remote_id)]
        for seq in seqs:
            self._event_ids.discard(self._events.pop(seq).event_id)
        self._deliveries = {i: d for i, d in self._deliveries.items() if d.event_seq not in seqs}
        return len(doomed) + len(operational)

    def _is_active(self, tracking_id: str) -> bool:
        tracking = self._trackings.get(tracking_id)
        return tracking is not None and tracking.state == TrackingState.ACTIVE

    # -- adaptive polling's work classes ------------------------------------------------

    async def load_work_classes(self) -> list[WorkClassSummary]:
        self._read()
        return [copy.deepcopy(w) for w in self._work_classes.values()]

    async def merge_work_classes(
        self, merges: Sequence[WorkClassMerge], forget: Sequence[tuple[str, str, str]] = ()
    ) -> list[WorkClassSummary]:
        if not merges and not forget:
            return []
        self._write()
        for key in forget:
            self._work_classes.pop(key, None)
        stored: list[WorkClassSummary] = []
        for m in merges:
            row = self._work_classes.get(m.key)
            item = m.folded(None if row is None else copy.deepcopy(row.summary))
            self._work_classes[m.key] = copy.deepcopy(item)
            stored.append(item)
        return stored


def _matches(t: Tracking, q: TrackingQuery, after: tuple[float, str] | None) -> bool:
    filters = (q.state, q.kind, q.outcome, q.workspace, q.group)
    values = (t.state, t.kind, t.outcome, t.workspace, t.group_name)
    return (
        all(f is None or f == v for f, v in zip(filters, values, strict=True))
        and all(t.labels.get(k) == v for k, v in q.labels.items())
        and (after is None or codec.tracking_key(t) < after)
    )
