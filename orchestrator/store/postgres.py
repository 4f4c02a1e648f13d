"""The PostgreSQL store: several ``orchestrator serve`` replicas on one database.

Work is shared with no coordinator of our own. Each active tracking carries a
lease (owner, expiry by the database's clock, fencing token): the replica that
accepted a tracking holds it first; a replica claims trackings whose lease ran
out (``FOR UPDATE SKIP LOCKED``, so claimers never wait for each other) and
renews what it holds. Poll results and terminal writes carry the token and the
statements refuse them once the lease has passed or moved (``pg_writes.py``).
A unique index allows one terminal event per tracking whatever happens, and
event seqs are assigned under an advisory lock so that seq order is commit
order. Deliveries are claimed with ``SKIP LOCKED`` too.

asyncpg (not a thread-backed driver): it is asyncio-native, speaks the binary
protocol, and caches prepared statements per connection, which keeps a poll
batch to one round trip of an already planned statement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from orchestrator.store import codec
from orchestrator.store import pg_queries as q
from orchestrator.store import pg_writes as writes
from orchestrator.store.base import (
    Claimed,
    Delivery,
    DeliveryState,
    DisabledSink,
    EventRecord,
    Finish,
    NewEvent,
    NewTracking,
    PollUpdate,
    Renewal,
    ReplaySpan,
    Tracking,
    TrackingQuery,
    WorkClassMerge,
    WorkClassSummary,
)
from orchestrator.store.leases import LeaseBook
from orchestrator.store.pg_pool import Pool, redacted
from orchestrator.store.schema import migrate_postgres


def _count(status: str) -> int:
    """The row count of a command tag such as ``UPDATE 3`` or ``INSERT 0 5``."""
    return int(status.rsplit(" ", 1)[-1])


class PostgresStore:
    shares_work = True

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
            try:
                async with self._pool.connection("leaving", transaction=False) as conn:
                    await conn.execute(q.FORGET_REPLICAS, self.replica_id)
            except Exception:
                pass  # the database is gone: our heartbeat simply stops
        await self._pool.close()
        await self._lease_pool.close()

    def stats(self) -> dict[str, int]:
        return {"leases": len(self.book)}

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        async with self._pool.connection("store read failed", transaction=False) as conn:
            return list(await conn.fetch(sql, *args))

    async def _execute(self, sql: str, *args: Any) -> str:
        async with self._pool.connection("store write failed", transaction=False) as conn:
            return str(await conn.execute(sql, *args))

    async def check_writable(self) -> bool:
        try:
            await self._execute(q.PROBE_WRITE)
        except Exception:
            return False
        return True

    # -- trackings ----------------------------------------------------------------------

    async def create_trackings(self, items: Sequence[NewTracking]) -> list[tuple[Tracking, bool]]:
        if not items:
            return []
        async with self._pool.connection("intake not stored", transaction=True) as conn:
            out, leases = await writes.create_trackings(
                conn, items, self.replica_id, self.lease_timeout_s, self.book
            )
        for tracking_id, token in leases.items():
            self.book.hold(tracking_id, token)
        return out

    async def record_polls(self, updates: Sequence[PollUpdate]) -> None:
        if updates:
            # One statement: its own transaction, one round trip.
            async with self._pool.connection("poll results not stored", transaction=False) as c:
                await writes.record_polls(c, updates, self.book)

    async def finish(self, items: Sequence[Finish]) -> list[bool]:
        if not items:
            return []
        async with self._pool.connection("terminal state not stored", transaction=False) as c:
            done = await writes.finish(c, items, self.book)
        # Ended, or refused because the lease moved: this replica holds it no more.
        self.book.drop([item.tracking_id for item in items])
        return done

    async def get_tracking(self, tracking_id: str) -> Tracking | None:
        rows = await self._fetch(q.TRACKING_BY_ID, tracking_id)
        return codec.tracking(rows[0]) if rows else None

    async def load_active(
        self, after: str | None = None, limit: int | None = None
    ) -> list[Tracking]:
        rows = await self._fetch(q.ACTIVE_TRACKINGS, after or "", limit)
        return [codec.tracking(row) for row in rows]

    async def active_counts(self) -> dict[str, int]:
        return {str(ws): int(n) for ws, n in await self._fetch(q.ACTIVE_COUNTS)}

    async def list_trackings(self, query: TrackingQuery) -> tuple[list[Tracking], str | None]:
        limit = codec.clamp_limit(query.limit)
        shape, params = codec.listing(query)
        sql = q.list_trackings(**shape._asdict())
        return codec.page(await self._fetch(sql, *params, limit + 1), limit)

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
            self.book.hold(row[0], int(token))
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
        lost = [t for t in ids if t not in renewed]
        self.book.drop(lost)
        return Renewal(lost, {str(row[0]): float(row[1]) for row in rows})

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

    async def notify_work(self) -> None:
        """Tell idle replicas that there is work to claim."""
        await self._execute(q.NOTIFY, q.CHANNEL, "work")

    # -- events and deliveries ----------------------------------------------------------

    async def events_after(self, after_seq: int, limit: int) -> list[EventRecord]:
        rows = await self._fetch(q.EVENTS_AFTER, after_seq, max(0, limit))
        return [codec.event(row) for row in rows]

    async def last_event_seq(self) -> int:
        rows = await self._fetch(q.LAST_EVENT_SEQ)
        return int(rows[0][0]) if rows else 0

    async def claim_deliveries(
        self, destination: str, now: float, limit: int, lease_s: float
    ) -> list[Delivery]:
        if limit <= 0:
            return []
        rows = await self._fetch(q.CLAIM_DELIVERIES, destination, now, limit, now + lease_s)
        return [codec.delivery(row) for row in rows]

    async def pending_destinations(self) -> list[str]:
        return [row[0] for row in await self._fetch(q.PENDING_DESTINATIONS)]

    async def outbox_pending_counts(self) -> dict[str, int]:
        return {row[0]: int(row[1]) for row in await self._fetch(q.PENDING_COUNTS)}

    async def mark_delivered(self, delivery_id: int, at: float, status: int) -> None:
        await self._execute(q.MARK_DELIVERED, at, status, delivery_id)

    async def mark_retry(
        self, delivery_id: int, next_attempt_at: float, status: int | None, error: str
    ) -> None:
        await self._execute(q.MARK_RETRY, next_attempt_at, status, error, delivery_id)

    async def mark_dead(self, delivery_id: int, at: float, status: int | None, error: str) -> None:
        await self._execute(q.MARK_DEAD, at, status, error, delivery_id)

    async def get_delivery(self, delivery_id: int) -> Delivery | None:
        rows = await self._fetch(q.DELIVERY_BY_ID, delivery_id)
        return codec.delivery(rows[0]) if rows else None

    async def list_deliveries(
        self, state: DeliveryState | None, limit: int, cursor: str | None
    ) -> tuple[list[Delivery], str | None]:
        size = codec.clamp_limit(limit)
        params = codec.delivery_listing(state, cursor)
        sql = q.DELIVERIES_ALL if state is None else q.DELIVERIES_BY_STATE
        return codec.delivery_page(await self._fetch(sql, *params, size + 1), size)

    async def redrive_delivery(self, delivery_id: int, now: float) -> Delivery | None:
        if not _count(await self._execute(q.REDRIVE_DELIVERY, now, delivery_id)):
            return None
        return await self.get_delivery(delivery_id)

    async def replay_deliveries(self, destination: str, span: ReplaySpan, now: float) -> int:
        until_seq = min(span.until_seq, 2**62)
        since = span.since if math.isfinite(span.since) else -1e308
        until = span.until if math.isfinite(span.until) else 1e308
        status = await self._execute(
            q.REPLAY_DELIVERIES, destination, now, span.after_seq, until_seq, since, until
        )
        return _count(status)

    # -- sinks --------------------------------------------------------------------------

    async def disable_sink(self, sink: DisabledSink, event: NewEvent) -> bool:
        async with self._pool.connection("sink state not stored", transaction=True) as conn:
            return await writes.disable_sink(conn, sink, event)

    async def enable_sink(self, destination: str, event: NewEvent) -> bool:
        async with self._pool.connection("sink state not stored", transaction=True) as conn:
            return await writes.enable_sink(conn, destination, event)

    async def merge_work_classes(
        self, merges: Sequence[WorkClassMerge], forget: Sequence[tuple[str, str, str]] = ()
    ) -> list[WorkClassSummary]:
        if forget:
            # Apart from the merge: a delete and a merge each holding a row the other
            # wants would deadlock.
            keys = [k[0] for k in forget], [k[1] for k in forget], [k[2] for k in forget]
            await self._execute(q.FORGET_WORK_CLASSES, *keys)
        if not merges:
            return []
        async with self._pool.connection("work classes not stored", transaction=True) as conn:
            return await writes.merge_work_classes(conn, merges)

    async def load_work_classes(self) -> list[WorkClassSummary]:
        rows = await self._fetch(q.WORK_CLASSES)
        return [
            WorkClassSummary(str(r[0]), str(r[1]), str(r[2]), codec.load(r[3]), float(r[4]))
            for r in rows
        ]

    async def disabled_sinks(self) -> list[DisabledSink]:
        rows = await self._fetch(q.DISABLED_SINKS)
        return [DisabledSink(str(r[0]), float(r[1]), str(r[2])) for r in rows]
