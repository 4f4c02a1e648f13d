"""The PostgreSQL store with several replicas on one database: leases, fencing, order.

Each test opens two or three ``PostgresStore`` objects on one fresh schema, as
replicas would. A lease is made to run out by moving its expiry into the past
(what the database's clock would do after ``lease_timeout_s``), except in the
one test that waits for a real expiry.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest

from orchestrator.errors import StoreError
from orchestrator.store import DisabledSink, PostgresStore, ReplaySpan
from orchestrator.store import pg_queries as q
from orchestrator.store.pg_connections import redacted, store_error
from orchestrator.store.postgres import poll_rows
from orchestrator.store.schema import numbered_migrations
from orchestrator.vocabulary import LeaseLoss
from tests.unit.test_store_contract import add, event, finish, new, poll, sink_event

Replicas = Callable[..., Any]


@pytest.fixture
async def replicas(postgres_dsn: str) -> AsyncIterator[Replicas]:
    async with AsyncExitStack() as stack:

        async def open_one(name: str, **options: Any) -> PostgresStore:
            store = PostgresStore(postgres_dsn, replica_id=name, pool_size=4, **options)
            await store.open()
            stack.push_async_callback(store.close)
            return store

        yield open_one


async def expire(store: PostgresStore, *tracking_ids: str) -> None:
    """Move the leases' expiry into the past, as the database's clock would."""
    conn = await asyncpg.connect(store.dsn)
    try:
        await conn.execute(
            "UPDATE trackings SET lease_until = 0 WHERE tracking_id = ANY($1)", list(tracking_ids)
        )
    finally:
        await conn.close()


async def test_the_accepting_replica_holds_new_trackings(replicas: Replicas) -> None:
    a, b = await replicas("a"), await replicas("b")
    await a.create_trackings([new(1), new(2)])
    assert set(a.book.tokens) == {"trk_1", "trk_2"}
    assert (await b.claim_trackings(10)).trackings == []
    # The same remote id through another replica: the existing tracking, lease unmoved.
    [(existing, is_new)] = await b.create_trackings([new("x", remote_id="J-1")])
    assert not is_new and existing.tracking_id == "trk_1" and len(b.book) == 0


async def test_a_takeover_fences_the_old_holder_out(replicas: Replicas) -> None:
    a, b = await replicas("a"), await replicas("b")
    await a.create_trackings([new(1), new(2)])
    await expire(a, "trk_1")
    claimed = await b.claim_trackings(10)
    assert [t.tracking_id for t in claimed.trackings] == ["trk_1"] and claimed.takeovers == 1

    # a still believes it holds trk_1: its poll result and its terminal write are refused.
    await a.record_polls([poll("trk_1", 5, event=event("evt_a", "trk_1", "sink:x"))])
    assert await a.finish([finish("trk_1", "evt_a_end", "sink:x")]) == [False]
    stored = await b.get_tracking("trk_1")
    assert stored is not None and stored.polls == 0 and stored.state == "active"
    # Its renewal says so; the lease it still has (trk_2) renews.
    assert (await a.renew_leases(1)).lost == {}  # trk_1 left a's book with the refused finish
    await a.record_polls([poll("trk_2", 1)])
    assert (await a.get_tracking("trk_2")).polls == 1  # type: ignore[union-attr]

    # The new holder writes and ends it; exactly one terminal event in the log.
    await b.record_polls([poll("trk_1", 1)])
    assert await b.finish([finish("trk_1", "evt_b_end", "sink:x")]) == [True]
    assert [e.event_id for e in await a.events_after(0, 10)] == ["evt_b_end"]


async def test_a_derived_deadline_is_fenced_like_the_poll_it_rides(replicas: Replicas) -> None:
    a, b = await replicas("a"), await replicas("b")
    await a.create_trackings([new(1, deadline_source="default")])
    await expire(a, "trk_1")
    await b.claim_trackings(10)
    # a's lease moved: neither its poll nor the deadline derived with it is written.
    await a.record_polls([poll("trk_1", 5, deadline=(5_000.0, "derived"))])
    stored = await b.get_tracking("trk_1")
    assert stored is not None and stored.polls == 0
    assert (stored.deadline_at, stored.deadline_source) == (10_000.0, "default")
    # The holder's batch folds to one row: the last deadline given stays, a later
    # update without one leaves it, and one that rides with an event is written too.
    await b.record_polls(
        [
            poll("trk_1", 1, deadline=(4_000.0, "derived")),
            poll("trk_1", 2, deadline=(6_000.0, "derived")),
            poll("trk_1", 3),
        ]
    )
    stored = await b.get_tracking("trk_1")
    assert stored is not None and stored.polls == 3
    assert (stored.deadline_at, stored.deadline_source) == (6_000.0, "derived")
    changed = event("evt_c", "trk_1", "sink:x", type="changed")
    await b.record_polls([poll("trk_1", 4, event=changed, deadline=(7_000.0, "derived"))])
    stored = await b.get_tracking("trk_1")
    assert stored is not None and (stored.polls, stored.deadline_at) == (4, 7_000.0)


async def test_one_replica_of_several_records_a_sink_disabled(replicas: Replicas) -> None:
    a, b = await replicas("a"), await replicas("b")
    gone = DisabledSink("sink:x", 2_500.0, "HTTP 410")
    answers = await asyncio.gather(
        a.disable_sink(gone, sink_event("op_a", "sink:x", "sink:y")),
        b.disable_sink(gone, sink_event("op_b", "sink:x", "sink:y")),
    )
    assert sorted(answers) == [False, True]
    assert await a.disabled_sinks() == await b.disabled_sinks() == [gone]
    [record] = await b.events_after(0, 10)
    assert record.tracking_id is None and record.sink == "sink:x"
    assert await a.last_event_seq() == record.seq
    assert await b.enable_sink("sink:x", sink_event("op_on", "sink:x", "sink:y"))
    assert await a.disabled_sinks() == []


async def test_a_database_made_by_001_is_upgraded_with_its_rows(postgres_dsn: str) -> None:
    [(_, name, script), *later] = numbered_migrations("pg_migrations")
    assert later, "this test is about the migrations after 001"
    conn = await asyncpg.connect(postgres_dsn)
    try:
        await conn.execute(script)
        await conn.execute(
            "CREATE TABLE schema_version (version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at double precision NOT NULL)"
        )
        await conn.execute("INSERT INTO schema_version VALUES (1, $1, 0)", name)
        await conn.execute(
            "INSERT INTO trackings (tracking_id, workspace, kind, remote_id, state, polls,"
            " next_poll_at, deadline_at, created_at, labels, notify)"
            " VALUES ('trk_old', 'default', 'function_job', 'J-old', 'active', 3, 1001,"
            " 9999999999, 1000, '\\x7b7d', 'terminal')"
        )
        seq = await conn.fetchval(
            "INSERT INTO events (event_id, tracking_id, type, time, payload)"
            " VALUES ('evt_old', 'trk_old', 'changed', 2000, '\\x7b7d') RETURNING seq"
        )
        await conn.execute("UPDATE event_seq_high SET seq = $1", seq)
    finally:
        await conn.close()
    store = PostgresStore(postgres_dsn, replica_id="upgraded", pool_size=2)
    await store.open()
    try:
        old = await store.get_tracking("trk_old")
        # Stored before the source was kept: unknown to the store (the engine judges
        # it by the deadline's length: engine/decision.defaulted).
        assert old is not None and old.polls == 3 and old.deadline_source is None
        # Its work class is not known: the first read that shows it writes it.
        assert (old.work_class, old.work_started_at) == (None, None)
        [record] = await store.events_after(0, 10)
        assert (record.event_id, record.tracking_id, record.sink) == ("evt_old", "trk_old", None)
        gone = DisabledSink("sink:x", 2_500.0, "HTTP 410")
        assert await store.disable_sink(gone, sink_event("op_1", "sink:x", "sink:y"))
        assert await store.replay_deliveries("sink:x", ReplaySpan(), now=3_000.0) == 1
        assert await store.last_event_seq() == seq + 1
    finally:
        await store.close()
    conn = await asyncpg.connect(postgres_dsn)
    try:
        assert await conn.fetchval("SELECT max(version) FROM schema_version") == 1 + len(later)
        with pytest.raises(asyncpg.CheckViolationError):  # exactly one of tracking and sink
            await conn.execute(
                "INSERT INTO events (event_id, tracking_id, sink, type, time, payload)"
                " VALUES ('bad', 'trk_old', 'sink:x', 't', 0, '\\x00')"
            )
    finally:
        await conn.close()


async def test_renewal_reports_leases_that_moved_or_ran_out(replicas: Replicas) -> None:
    a, b = await replicas("a"), await replicas("b")
    await a.create_trackings([new(i) for i in range(4)])
    await expire(a, "trk_0", "trk_1")
    [taken] = (await b.claim_trackings(1)).trackings  # one of the two; the other ran out
    lost = (await a.renew_leases(4)).lost
    ran_out = ({"trk_0", "trk_1"} - {taken.tracking_id}).pop()
    assert lost == {taken.tracking_id: LeaseLoss.TAKEN, ran_out: LeaseLoss.EXPIRED}
    assert sorted(a.book.tokens) == ["trk_2", "trk_3"]
    # A write for a lease that ran out but was not taken is refused too.
    await expire(a, "trk_2")
    await a.record_polls([poll("trk_2", 3)])
    assert (await a.get_tracking("trk_2")).polls == 0  # type: ignore[union-attr]
    assert await a.finish([finish("trk_2", "e2")]) == [False]


async def test_a_replica_that_stops_renewing_loses_its_leases(replicas: Replicas) -> None:
    a = await replicas("a", lease_timeout_s=0.3)
    b = await replicas("b", lease_timeout_s=0.3)
    await a.create_trackings([new(i) for i in range(5)])
    taken: set[str] = set()
    for _ in range(200):  # bounded: the leases run out 0.3 s after the intake
        taken |= {t.tracking_id for t in (await b.claim_trackings(10)).trackings}
        if len(taken) == 5:
            break
        await asyncio.sleep(0.05)
    assert taken == {f"trk_{i}" for i in range(5)}
    assert (await a.renew_leases(5)).lost == dict.fromkeys(taken, LeaseLoss.TAKEN)


async def test_claims_are_disjoint_capped_and_soonest_due_first(replicas: Replicas) -> None:
    a, b, c = await replicas("a"), await replicas("b"), await replicas("c")
    await a.create_trackings([new(i, next_poll_at=1_000.0 + i) for i in range(60)])
    await expire(a, *[f"trk_{i}" for i in range(60)])
    first = await b.claim_trackings(5)
    assert [t.tracking_id for t in first.trackings] == sorted(f"trk_{i}" for i in range(5))
    results = await asyncio.gather(*(s.claim_trackings(20) for s in (b, c, b, c)))
    ids = [t.tracking_id for r in results for t in r.trackings]
    assert len(ids) == len(set(ids)) == 55  # nothing claimed twice, each claim within 20
    assert all(len(r.trackings) <= 20 for r in results)
    assert (await a.claim_trackings(10)).trackings == []


async def test_released_leases_are_claimable_at_once(replicas: Replicas) -> None:
    a, b = await replicas("a"), await replicas("b")
    await a.create_trackings([new(1), new(2), new(3)])
    await a.release_leases(["trk_2"])
    claimed = await b.claim_trackings(10)
    assert [t.tracking_id for t in claimed.trackings] == ["trk_2"]
    assert claimed.takeovers == 0  # given up, not taken over
    await a.release_leases()
    assert len(a.book) == 0
    assert sorted(t.tracking_id for t in (await b.claim_trackings(10)).trackings) == [
        "trk_1",
        "trk_3",
    ]


async def test_an_abandon_is_accepted_from_any_replica(replicas: Replicas) -> None:
    a, b = await replicas("a"), await replicas("b")
    await a.create_trackings([new(1)])
    # b holds no lease: its own verdict would be refused, a caller's abandon is not.
    assert await b.finish([finish("trk_1", "e_ok")]) == [False]
    assert await b.finish([finish("trk_1", "e_ab", outcome="abandoned", result=None)]) == [True]
    assert await a.finish([finish("trk_1", "e_late")]) == [False]
    assert [e.event_id for e in await a.events_after(0, 10)] == ["e_ab"]


async def test_the_database_allows_one_terminal_event_per_tracking(replicas: Replicas) -> None:
    a = await replicas("a")
    await a.create_trackings([new(1)])
    assert await a.finish([finish("trk_1", "e1")]) == [True]
    conn = await asyncpg.connect(a.dsn)
    try:
        with pytest.raises(asyncpg.UniqueViolationError):
            await conn.execute(
                "INSERT INTO events (event_id, tracking_id, type, time, payload, terminal)"
                " VALUES ('e2', 'trk_1', 'x', 0, '\\x00', true)"
            )
    finally:
        await conn.close()


async def test_deliveries_are_claimed_by_one_replica_at_a_time(replicas: Replicas) -> None:
    a, b = await replicas("a"), await replicas("b")
    await a.create_trackings([new(i) for i in range(30)])
    await a.finish([finish(f"trk_{i}", f"e{i}", "sink:x") for i in range(30)])
    got = await asyncio.gather(
        *(s.claim_deliveries("sink:x", 9_999.0, 8, 30.0) for s in (a, b, a, b, a))
    )
    ids = [d.delivery_id for batch in got for d in batch]
    assert len(ids) == len(set(ids)) == 30


async def test_heartbeats_list_the_live_replicas(replicas: Replicas) -> None:
    a, b = await replicas("a"), await replicas("b")
    assert list((await a.renew_leases(0)).live) == ["a"]
    seen = (await b.renew_leases(3)).live
    assert list(seen) == ["a", "b"] and seen["a"] < seen["b"]  # b's is now: later than a's
    await b.close()
    assert list((await a.renew_leases(0)).live) == ["a"]


async def test_the_feed_never_skips_an_event_committed_late(replicas: Replicas) -> None:
    """Concurrent writers on three replicas, a reader following ``after=SEQ``: every
    event the log ends with was seen by the reader, in seq order."""
    stores = [await replicas(name) for name in ("a", "b", "c")]
    per_store = 60
    for n, store in enumerate(stores):
        await store.create_trackings([new(f"{n}_{i}", notify="all") for i in range(per_store)])

    async def write(n: int, store: PostgresStore) -> None:
        rng = random.Random(n)
        for i in range(per_store):
            tid = f"trk_{n}_{i}"
            update = poll(tid, 1, event=event(f"sc_{n}_{i}", tid, "sink:x", type="changed"))
            await store.record_polls([update])
            await asyncio.sleep(rng.random() * 0.002)
            await store.finish([finish(tid, f"end_{n}_{i}", "sink:x", "sink:y")])

    seen: list[int] = []
    done = asyncio.Event()

    async def follow(reader: PostgresStore) -> None:
        after = 0
        while True:
            finished = done.is_set()
            for record in await reader.events_after(after, 50):
                seen.append(record.seq)
                after = record.seq
            if finished:
                return
            await asyncio.sleep(0)

    reader = await replicas("reader")
    following = asyncio.create_task(follow(reader))
    writers = [write(n, s) for n, s in enumerate(stores) for _ in range(1)]
    await asyncio.gather(*writers)
    done.set()
    await following
    everything = [e.seq for e in await reader.events_after(0, 10_000)]
    assert len(everything) == 2 * 3 * per_store
    assert seen == everything  # nothing skipped, nothing out of order
    assert await reader.last_event_seq() == everything[-1]


def test_messages_never_show_the_password() -> None:
    dsn = "postgresql://orch:s3cret@db.example:5432/orch"
    assert "s3cret" not in redacted(dsn) and "db.example:5432" in redacted(dsn)
    store = PostgresStore(dsn, replica_id="r", password="s3cret")
    assert "s3cret" not in repr(store)
    error = store_error(OSError("connection refused"), "cannot connect to " + redacted(dsn))
    assert "s3cret" not in str(error)


async def test_a_refused_create_names_no_secret_and_writes_nothing(replicas: Replicas) -> None:
    a = await replicas("a")
    await a.create_trackings([new(1)])
    with pytest.raises(StoreError):
        await a.create_trackings([new(2), new(1, remote_id="J-other")])
    assert await a.get_tracking("trk_2") is None and "trk_2" not in a.book.tokens


@pytest.mark.parametrize("plan_mode", ["force_custom_plan", "force_generic_plan"])
async def test_bulk_lease_statements_join_the_table_by_key_only(
    replicas: Replicas, plan_mode: str
) -> None:
    """Renewal, release and poll results over thousands of leases: no plan joins two
    unindexed row sets by a filter, the nested loop that made a renewal of 10,000
    leases take 17 s (quadratic) and run past its bound."""
    a = await replicas("a")
    await a.create_trackings([new(i) for i in range(3000)])
    ids, tokens = a.book.arrays()
    rows = poll_rows([poll(t, 1) for t in ids], a.book.tokens)
    polls = [list(column) for column in zip(*rows, strict=True)]
    conn = await asyncpg.connect(a.dsn)
    try:
        await conn.execute(f"SET plan_cache_mode = {plan_mode}")
        for sql, args in (
            (q.RENEW, (ids, tokens, 30.0, "a", len(ids))),
            (q.RELEASE, (ids, tokens, 0.0)),
            (q.RECORD_POLLS, tuple(polls)),
        ):
            plan = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + sql, *args))
            assert "Join Filter" not in plan, plan
    finally:
        await conn.close()


async def test_replicas_merges_of_one_work_class_all_count(replicas: Replicas) -> None:
    # New rows and existing ones, from two replicas at once: each merge folds into
    # the one before it, none overwrites another.
    a, b = await replicas("a"), await replicas("b")
    merges = [
        store.merge_work_classes([add("x", f"{store.replica_id}{n}", 1), add("y", "w", 2)])
        for n in range(6)
        for store in (a, b)
    ]
    await asyncio.gather(*merges)
    found = {w.work_class: w.summary for w in await b.load_work_classes()}
    assert found["x"]["n"] == 12 and found["y"]["n"] == 24
    assert len(set(found["x"]["writers"])) == 12
