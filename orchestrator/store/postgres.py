"""The PostgreSQL store: several ``orchestrator serve`` replicas on one database.

Work is shared with no coordinator of our own. Each active tracking carries a
lease (owner, expiry by the database's clock, fencing token): the replica that
accepted a tracking holds it first; a replica claims trackings whose lease ran
out (``FOR UPDATE SKIP LOCKED``, so claimers never wait for each other) and
renews what it holds. Poll results and terminal writes, with their events, are
one statement each (no lock is held across a round trip, which a slow link
would stretch); they carry the token (``LeaseBook``) and the statements refuse
them once the lease has passed or moved, so a replica that stalled past its
lease cannot overwrite its successor's work. A unique index allows one terminal
event per tracking whatever happens. Deliveries are claimed with ``SKIP LOCKED``
too.

Event order: every transaction that appends events takes one transaction-level
advisory lock before its first seq is assigned and holds it to commit.
PostgreSQL hands out identity values in call order but commits in any order, so
without it a reader following ``after=SEQ`` could pass seq 11 (committed) while
seq 10 is still being written, and never see 10. Under the lock the next writer
gets its seq only once the previous writer is committed and visible: seq order
is commit order, and every snapshot sees a prefix of the log.

asyncpg (not a thread-backed driver): it is asyncio-native, speaks the binary
protocol, and caches prepared statements per connection, which keeps a poll
batch to one round trip of an already planned statement.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from orchestrator.store import codec
from orchestrator.store import pg_groups as groups
from orchestrator.store import pg_queries as q
from orchestrator.store.base import (
    Claimed,
    Delivery,
    Finish,
    NewEvent,
    NewTracking,
    PollUpdate,
    Renewal,
    Store,
    Tracking,
    WorkClassMerge,
    WorkClassSummary,
)
from orchestrator.store.group_queries import SqlGroupReads
from orchestrator.store.groups import Group, GroupEventFactory, SealGroup
from orchestrator.store.pg_connections import Pool, redacted
from orchestrator.store.schema import migrate_postgres
from orchestrator.vocabulary import LeaseLoss


class LeaseBook:
    """The leases this replica holds: tracking_id to fencing token, which its poll
    results and terminal writes carry; and those whose terminal write is in flight
    (a renewal that crosses it finds them ended, by this replica: nothing lost)."""

    def __init__(self) -> None:
        self.tokens: dict[str, int] = {}
        self.ending: set[str] = set()

    def __len__(self) -> int:
        return len(self.tokens)

    def drop(self, tracking_ids: Sequence[str]) -> None:
        for tracking_id in tracking_ids:
            self.tokens.pop(tracking_id, None)

    def arrays(self, tracking_ids: Sequence[str] | None = None) -> tuple[list[str], list[int]]:
        ids = sorted(
            self.tokens if tracking_ids is None else (t for t in tracking_ids if t in self.tokens)
        )
        return ids, [self.tokens[t] for t in ids]


def _count(status: str) -> int:
    """The row count of a command tag such as ``UPDATE 3`` or ``INSERT 0 5``."""
    return int(status.rsplit(" ", 1)[-1])


def _columns(rows: Sequence[Sequence[Any]], width: int) -> list[list[Any]]:
    """Rows as the column arrays an unnest takes (empty arrays for no rows)."""
    return [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in range(width)]


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


def poll_rows(updates: Sequence[PollUpdate], tokens: dict[str, int]) -> list[list[Any]]:
    """The folded ``codec.poll_row`` of each tracking this replica holds, with its token."""
    held = [u for u in updates if u.tracking_id in tokens]
    return [[*row, tokens[row[0]]] for row in codec.fold_polls(held)]


class PostgresStore(codec.SqlShared, SqlGroupReads, Store):
    shares_work = True
    _q = q
    _sql = staticmethod(q.numbered)
    _NO_LIMIT = None

    def __init__(
        self,
        dsn: str,
        *,
        replica_id: str,
        password: str | None = None,
        pool_size: int = 10,
        lease_timeout_s: float = 30.0,
    ) -> None:
        self.dsn = dsn
        self.replica_id = replica_id
        self.lease_timeout_s = lease_timeout_s
        self._pool = Pool(dsn, password, pool_size, f"orchestrator {replica_id}")
        # Renewals and heartbeats on a connection of their own: on a slow database they
        # must not queue behind poll results and claims for a connection of the pool.
        self._lease_pool = Pool(dsn, password, 1, f"orchestrator {replica_id} leases")
        self.book = LeaseBook()

    def __repr__(self) -> str:
        return f"PostgresStore({redacted(self.dsn)!r}, replica_id={self.replica_id!r})"

    @property
    def connect_kwargs(self) -> dict[str, Any]:
        """How to open a connection of our own (the listener's)."""
        return self._pool.connect_kwargs()

    # -- lifecycle ----------------------------------------------------------------------

    async def open(self) -> None:
        await self._pool.open()
        try:
            await self._lease_pool.open()
            async with self._pool.connection("cannot migrate", transaction=False) as conn:
                await migrate_postgres(conn)
                # Leases an earlier process under the same replica id left behind.
                await conn.execute(q.RELEASE_OWNER, self.replica_id)
        except BaseException:
            await self._pool.close()
            await self._lease_pool.close()
            raise

    async def close(self) -> None:
        if self._pool.is_open:
            # The database may be gone: our heartbeat then simply stops.
            with contextlib.suppress(Exception):
                async with self._pool.connection("leaving", transaction=False) as conn:
                    await conn.execute(q.FORGET_REPLICAS, self.replica_id)
        await self._pool.close()
        await self._lease_pool.close()

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        async with self._pool.connection("store read failed", transaction=False) as conn:
            return list(await conn.fetch(sql, *args))

    async def _execute(self, sql: str, *args: Any) -> int:
        async with self._pool.connection("store write failed", transaction=False) as conn:
            return _count(str(await conn.execute(sql, *args)))

    async def check_writable(self) -> bool:
        try:
            await self._execute(q.PROBE_WRITE)
        except Exception:
            return False
        return True

    # -- trackings ----------------------------------------------------------------------

    async def create_trackings(
        self, items: Sequence[NewTracking], seal: SealGroup | None = None
    ) -> list[tuple[Tracking, bool]]:
        """Insert, leased to this replica."""
        if not items and seal is None:
            return []
        columns = _columns([codec.insert_tracking_params(item) for item in items], 17)
        # Rows alone are one statement, atomic by itself: no BEGIN and COMMIT round trips
        # (on a distant database, intake answers in one round trip rather than three).
        alone = seal is None and not any(i.labels or i.group_name is not None for i in items)
        async with self._pool.connection("intake not stored", transaction=not alone) as conn:
            rows = await conn.fetch(
                q.INSERT_TRACKINGS, *columns, self.replica_id, self.lease_timeout_s
            )
            leases = {row[0]: int(row[1]) for row in rows}
            labels = codec.label_rows(items, leases)
            if labels:
                await conn.execute(q.INSERT_LABELS, *_columns(labels, 3))
            known = [item for item in items if item.tracking_id not in leases]
            existing: dict[tuple[str, str, str], Tracking] = {}
            if known:
                keys = _columns([(i.workspace, i.kind, i.remote_id) for i in known], 3)
                for row in await conn.fetch(q.TRACKINGS_BY_REMOTE, *keys):
                    existing[row[1], row[2], row[3]] = codec.tracking(row)
            if seal is not None:  # the log's lock before any group row's
                await conn.execute(q.LOCK_EVENTS)
            await groups.join(conn, items, set(leases))
            if seal is not None:
                await groups.seal(conn, seal, create=True)
        self.book.tokens.update(leases)
        return [
            (codec.new_tracking(item), True)
            if item.tracking_id in leases
            else (existing[item.workspace, item.kind, item.remote_id], False)
            for item in items
        ]

    async def record_polls(self, updates: Sequence[PollUpdate]) -> None:
        """Poll results of the trackings this replica holds (others are not even sent),
        each tracking's folded into one row, with the events of the rows that moved: one
        statement (its own transaction, one round trip), whatever the batch holds."""
        if not updates:
            return
        async with self._pool.connection("poll results not stored", transaction=False) as conn:
            rows = poll_rows(updates, self.book.tokens)
            if not rows:
                return
            held = self.book.tokens
            events = [
                (u.event, False) for u in updates if u.event is not None and u.tracking_id in held
            ]
            if events:
                await conn.fetch(
                    q.RECORD_POLLS_EVENTS, *_columns(rows, 15), *_event_columns(events)
                )
            else:
                await conn.execute(q.RECORD_POLLS, *_columns(rows, 15))

    async def finish(self, items: Sequence[Finish]) -> list[bool]:
        """Terminal writes with their events in one statement: a held tracking's fenced by
        its lease, an abandon of one this replica does not hold unfenced, any other not
        ours to end (its holder will). Only the first write of a tracking counts."""
        if not items:
            return []
        rows: dict[str, list[Any]] = {}
        events: list[tuple[NewEvent, bool]] = []
        for item in items:
            token = self.book.tokens.get(item.tracking_id)
            if item.tracking_id in rows or (token is None and item.outcome != "abandoned"):
                continue
            rows[item.tracking_id] = [*codec.finish_row(item), token]
            events.append((item.event, True))
        moved: set[str] = set()
        self.book.ending.update(rows)
        try:
            # In a group: its counts (and maybe its end) in the same transaction.
            grouped = any(item.group_name is not None for item in items)
            async with self._pool.connection(
                "terminal state not stored", transaction=grouped
            ) as conn:
                if rows:
                    columns = _columns(list(rows.values()), 11)
                    found = await conn.fetch(q.FINISH, *columns, *_event_columns(events))
                    moved = {row[0] for row in found}
                    ended = [(r[1], r[2], r[3]) for r in found if r[1] is not None]
                    await groups.count_ends(conn, ended)
                    factories = {i.group_name: i.group_event for i in items if i.group_event}
                    last: dict[str, float] = {}
                    for name, _, at in ended:
                        last[name] = max(at, last.get(name, at))
                    for name, at in sorted(last.items()):  # each group decided once
                        if factories.get(name) is not None:
                            await groups.complete(conn, name, at, factories[name])
        finally:
            self.book.ending.difference_update(rows)
        # Ended, or refused because the lease moved: this replica holds it no more.
        self.book.drop([item.tracking_id for item in items])
        out: list[bool] = []
        for item in items:
            out.append(item.tracking_id in moved)
            moved.discard(item.tracking_id)  # a second write of it in the batch did nothing
        return out

    async def seal_group(self, seal: SealGroup) -> Group | None:
        async with self._pool.connection("seal not stored", transaction=True) as conn:
            return await groups.seal(conn, seal, create=False)

    async def expire_groups(self, now: float, event: GroupEventFactory) -> list[Group]:
        async with self._pool.connection("group deadline not stored", transaction=True) as conn:
            return await groups.expire(conn, now, event)

    async def prune(self, before: float, batch: int) -> int:
        rows = await self._fetch(q.PRUNE, before, max(0, batch))
        return int(rows[0][0])

    # -- leases -------------------------------------------------------------------------

    async def claim_trackings(self, limit: int) -> Claimed:
        if limit <= 0:
            return Claimed()
        async with self._pool.connection("claim failed", transaction=False) as conn:
            rows = await conn.fetch(q.CLAIM, self.replica_id, limit, self.lease_timeout_s)
        claimed = Claimed()
        for row in rows:
            token, previous = row[q.CLAIM_TOKEN], row[q.CLAIM_TOKEN + 1]
            self.book.tokens[row[0]] = int(token)
            claimed.trackings.append(codec.tracking(row))
            if previous is not None and previous != self.replica_id:
                claimed.takeovers += 1
        claimed.trackings.sort(key=lambda t: t.tracking_id)
        return claimed

    async def renew_leases(self, held: int) -> Renewal:
        ids, tokens = self.book.arrays()
        async with self._lease_pool.connection("renewal failed", transaction=False) as conn:
            rows = await conn.fetch(
                q.RENEW, ids, tokens, self.lease_timeout_s, self.replica_id, held
            )
            renewed = set(next(r[2] for r in rows if r[0] == self.replica_id) or ())
            missed = [t for t in ids if t not in renewed]
            # Rare (a terminal write crossing the renewal, or trouble): one more round
            # trip says why, read after the renewal committed.
            found = await conn.fetch(q.LEASE_STATES, missed) if missed else []
        lost = self._why_lost(missed, {row[0]: (row[1], row[2]) for row in found})
        self.book.drop(missed)
        return Renewal(lost, {str(row[0]): float(row[1]) for row in rows})

    def _why_lost(
        self, missed: Sequence[str], found: dict[str, tuple[str, str | None]]
    ) -> dict[str, LeaseLoss]:
        """Why each tracking a renewal could not extend is not this replica's any more,
        from its row as the renewal left it (none: pruned, so it had ended)."""
        lost: dict[str, LeaseLoss] = {}
        for tracking_id in missed:
            state, owner = found.get(tracking_id, ("terminal", None))
            if state != "active":
                # Its terminal write in flight, or done since the renewal's snapshot of
                # ids (which then dropped it from the book), is this replica's own.
                mine = tracking_id in self.book.ending or tracking_id not in self.book.tokens
                lost[tracking_id] = LeaseLoss.FINISHED if mine else LeaseLoss.ENDED_ELSEWHERE
            elif owner is not None and owner != self.replica_id:
                lost[tracking_id] = LeaseLoss.TAKEN
            else:
                lost[tracking_id] = LeaseLoss.EXPIRED
        return lost

    async def release_leases(
        self, tracking_ids: Sequence[str] | None = None, *, hold_s: float = 0.0
    ) -> None:
        ids, tokens = self.book.arrays(tracking_ids)
        if not ids:
            return
        self.book.drop(ids)  # given up whatever the database says: never written again
        async with self._pool.connection("release failed", transaction=False) as conn:
            await conn.execute(q.RELEASE, ids, tokens, hold_s)

    def forget_leases(self) -> None:
        self.book.tokens.clear()

    # -- events and deliveries ----------------------------------------------------------

    async def claim_deliveries(
        self, destination: str, now: float, limit: int, lease_s: float
    ) -> list[Delivery]:
        if limit <= 0:
            return []
        rows = await self._fetch(q.CLAIM_DELIVERIES, destination, now, limit, now + lease_s)
        return [codec.delivery(row) for row in rows]

    # -- sinks --------------------------------------------------------------------------

    async def _change_sink(self, sql: str, event: NewEvent, *params: Any) -> bool:
        """``sql``'s change of a sink's state, with its operational event appended under
        the log's lock, and word of it to the other replicas (they adopt it)."""
        async with self._pool.connection("sink state not stored", transaction=True) as conn:
            if _count(await conn.execute(sql, *params)) != 1:
                return False
            await conn.execute(q.LOCK_EVENTS)
            await conn.execute(q.INSERT_EVENTS, *_event_columns([(event, False)]))
            await conn.execute(q.NOTIFY, q.CHANNEL, "sinks")
        return True

    async def merge_work_classes(
        self, merges: Sequence[WorkClassMerge], forget: Sequence[tuple[str, str, str]] = ()
    ) -> list[WorkClassSummary]:
        """Each merge folded into its row, the rows locked to commit: a peer's merge of the
        same class waits and then folds into this one's result."""
        if forget:
            # Apart from the merge: a delete and a merge each holding a row the other
            # wants would deadlock.
            await self._execute(q.FORGET_WORK_CLASSES, *_columns(forget, 3))
        if not merges:
            return []
        ordered = sorted(merges, key=lambda m: m.key)  # one lock order for every replica
        keys = _columns([m.key for m in ordered], 3)
        async with self._pool.connection("work classes not stored", transaction=True) as conn:
            rows = await conn.fetch(q.LOCK_WORK_CLASSES, *keys, [m.updated_at for m in ordered])
            stored = {(r[0], r[1], r[2]): r[3] for r in rows}
            items = [
                m.folded(codec.load(stored[m.key]) if stored.get(m.key) else None) for m in ordered
            ]
            summaries = [codec.dump(i.summary) for i in items]
            await conn.execute(q.SAVE_WORK_CLASSES, *keys, summaries, [i.updated_at for i in items])
        return items
