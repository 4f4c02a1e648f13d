"""A renewal that crosses a terminal write of the same replica (issue #53).

Two healthy replicas logged ``leases lost to other replicas`` a few times an
hour, with no lease ever changing hands. The renewal takes its list of held ids,
then sends one statement; a tracking this replica finishes in between is
terminal by the time the statement reaches its row, so it is not renewed. That
is no lease lost: the store says it ``finished``, and only work still held that
went elsewhere (``taken``, ``expired``) is reported as lost.

The crossing is made deterministic on a real PostgreSQL: a third connection
holds the tracking's row, the terminal write queues for it first and the renewal
second, and the row is let go (PostgreSQL grants a row to its waiters in turn).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg  # type: ignore[import-untyped]
import pytest

from orchestrator.store import PostgresStore
from orchestrator.vocabulary import LeaseLoss
from tests.unit.test_store_contract import finish, new


@pytest.fixture
async def store(postgres_dsn: str) -> AsyncIterator[PostgresStore]:
    s = PostgresStore(postgres_dsn, replica_id="a", pool_size=4)
    await s.open()
    try:
        yield s
    finally:
        await s.close()


async def _waiting_on_locks(conn: asyncpg.Connection, n: int) -> None:
    """Until ``n`` other backends of this database wait for a lock (bounded)."""
    for _ in range(500):
        waiting = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        if waiting >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{n} statements never queued for the row")


async def test_a_tracking_finished_during_the_renewal_is_not_a_lost_lease(
    store: PostgresStore,
) -> None:
    await store.create_trackings([new(1), new(2)])
    blocker = await asyncpg.connect(store.dsn)
    try:
        holding = blocker.transaction()
        await holding.start()
        await blocker.execute("SELECT 1 FROM trackings WHERE tracking_id = 'trk_1' FOR UPDATE")
        ending = asyncio.create_task(store.finish([finish("trk_1", "evt_1")]))
        await _waiting_on_locks(blocker, 1)
        renewing = asyncio.create_task(store.renew_leases(2))  # its ids: trk_1 and trk_2
        await _waiting_on_locks(blocker, 2)
        await holding.commit()  # the terminal write goes first, then the renewal
        assert await ending == [True]
        renewal = await renewing
    finally:
        await blocker.close()
    assert renewal.lost == {"trk_1": LeaseLoss.FINISHED}
    assert store.book.tokens.keys() == {"trk_2"} and not store.book.ending


async def test_a_tracking_abandoned_through_another_replica_ended_elsewhere(
    store: PostgresStore, postgres_dsn: str
) -> None:
    other = PostgresStore(postgres_dsn, replica_id="b", pool_size=2)
    await other.open()
    try:
        await store.create_trackings([new(1), new(2)])
        # A caller's abandon through b: taken without the lease (a holds it).
        assert await other.finish([finish("trk_1", "evt_1", outcome="abandoned")]) == [True]
    finally:
        await other.close()
    assert (await store.renew_leases(2)).lost == {"trk_1": LeaseLoss.ENDED_ELSEWHERE}
