"""The store's behaviour, one suite run against every backend (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import StoreError, StoreUnavailable
from orchestrator.store import (
    DisabledSink,
    Finish,
    InvalidCursor,
    MemoryStore,
    NewEvent,
    NewTracking,
    PollUpdate,
    PostgresStore,
    ReplaySpan,
    SqliteStore,
    Store,
    TrackingQuery,
    WorkClassMerge,
    WorkClassSummary,
)
from tests.pgserver import fresh_schema


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    backend: Store
    if request.param == "memory":
        backend = MemoryStore()
    elif request.param == "sqlite":
        backend = SqliteStore(tmp_path / "store.db", commit_interval_s=0.001)
    else:
        # A fresh schema of the session's server (tests/conftest.py); the store that
        # accepted a tracking holds its lease, so every write here is its holder's.
        server = request.getfixturevalue("postgres_server")
        async with fresh_schema(server) as dsn:
            backend = PostgresStore(dsn, replica_id="contract", pool_size=4)
            await backend.open()
            yield backend
            await backend.close()
        return
    await backend.open()
    yield backend
    await backend.close()


def new(n: int | str, **overrides: Any) -> NewTracking:
    fields: dict[str, Any] = {
        "tracking_id": f"trk_{n}",
        "workspace": "default",
        "kind": "function_job",
        "remote_id": f"J-{n}",
        "deadline_at": 10_000.0,
        "created_at": 1_000.0 + (n if isinstance(n, int) else 0),
        "next_poll_at": 1_001.0,
    }
    fields.update(overrides)
    return NewTracking(**fields)


def event(event_id: str, tracking_id: str, *destinations: str, **overrides: Any) -> NewEvent:
    fields: dict[str, Any] = {
        "event_id": event_id,
        "tracking_id": tracking_id,
        "type": "com.moltaro.orchestrator.tracking.succeeded",
        "time": 2_000.0,
        "payload": f'{{"id":"{event_id}"}}'.encode(),
        "destinations": list(destinations),
    }
    fields.update(overrides)
    return NewEvent(**fields)


def finish(tracking_id: str, event_id: str, *destinations: str, **overrides: Any) -> Finish:
    fields: dict[str, Any] = {
        "tracking_id": tracking_id,
        "outcome": "succeeded",
        "terminal_at": 2_000.0,
        "result": {"summary": "ok"},
        "event": event(event_id, tracking_id, *destinations),
    }
    fields.update(overrides)
    return Finish(**fields)


def poll(tracking_id: str, polls: int = 1, **overrides: Any) -> PollUpdate:
    fields: dict[str, Any] = {
        "tracking_id": tracking_id,
        "polls": polls,
        "last_polled_at": 1_500.0 + polls,
        "next_poll_at": 1_600.0 + polls,
    }
    fields.update(overrides)
    return PollUpdate(**fields)


# -- intake ---------------------------------------------------------------------------------


async def test_create_returns_new_rows_in_request_order(store: Store) -> None:
    items = [new(3, labels={"team": "billing"}, correlation_id="req-3"), new(1), new(2)]
    created = await store.create_trackings(items)
    assert [(t.tracking_id, is_new) for t, is_new in created] == [
        ("trk_3", True),
        ("trk_1", True),
        ("trk_2", True),
    ]
    first = created[0][0]
    assert first.state == "active" and first.outcome is None and first.polls == 0
    assert first.labels == {"team": "billing"} and first.correlation_id == "req-3"
    assert first.next_poll_at == 1_001.0 and first.deadline_at == 10_000.0
    assert await store.get_tracking("trk_3") == first


async def test_create_is_idempotent_on_workspace_kind_remote_id(store: Store) -> None:
    [(original, _)] = await store.create_trackings([new(1, labels={"a": "1"})])
    again = await store.create_trackings(
        [new(2), new("x", remote_id="J-1", labels={"a": "changed"}), new(3)]
    )
    assert [(t.tracking_id, is_new) for t, is_new in again] == [
        ("trk_2", True),
        ("trk_1", False),
        ("trk_3", True),
    ]
    assert again[1][0] == original  # the existing row, untouched
    assert await store.get_tracking("trk_x") is None


async def test_same_remote_id_in_another_workspace_or_kind_is_a_new_tracking(
    store: Store,
) -> None:
    created = await store.create_trackings(
        [
            new("a", remote_id="R"),
            new("b", remote_id="R", workspace="other"),
            new("c", remote_id="R", kind="net_operation_build"),
        ]
    )
    assert [is_new for _, is_new in created] == [True, True, True]


async def test_duplicates_within_one_call_return_the_first_row(store: Store) -> None:
    created = await store.create_trackings([new(1), new("dup", remote_id="J-1"), new(2)])
    assert [(t.tracking_id, is_new) for t, is_new in created] == [
        ("trk_1", True),
        ("trk_1", False),
        ("trk_2", True),
    ]
    assert created[1][0] == created[0][0]


async def test_a_large_call_with_labels_and_duplicates_far_apart(store: Store) -> None:
    # More rows than one statement takes: duplicates and labels across its seams.
    items = [new(i, labels={"n": str(i)}) if i % 7 == 0 else new(i) for i in range(250)]
    items += [new("late", remote_id="J-3"), new("later", remote_id="J-245")]
    created = await store.create_trackings(items)
    assert [is_new for _, is_new in created] == [True] * 250 + [False, False]
    assert created[250][0].tracking_id == "trk_3" and created[251][0].tracking_id == "trk_245"
    for i in (0, 7, 91, 182, 245):
        stored = await store.get_tracking(f"trk_{i}")
        assert stored is not None and stored.remote_id == f"J-{i}"
        assert stored.labels == ({"n": str(i)} if i % 7 == 0 else {})
    assert await store.get_tracking("trk_late") is None


async def test_existing_terminal_tracking_is_returned_not_recreated(store: Store) -> None:
    await store.create_trackings([new(1)])
    await store.finish([finish("trk_1", "evt_1")])
    [(again, is_new)] = await store.create_trackings([new("y", remote_id="J-1")])
    assert not is_new and again.tracking_id == "trk_1" and again.state == "terminal"


async def test_a_failing_create_writes_nothing(store: Store) -> None:
    await store.create_trackings([new(1)])
    # trk_1 again under another remote id: the whole call fails, its other item included.
    with pytest.raises(StoreError):
        await store.create_trackings([new(2), new(1, remote_id="J-other")])
    assert await store.get_tracking("trk_2") is None
    assert [t.tracking_id for t in await store.load_active()] == ["trk_1"]


async def test_empty_calls_are_harmless(store: Store) -> None:
    assert await store.create_trackings([]) == []
    assert await store.finish([]) == []
    await store.record_polls([])
    assert await store.get_tracking("nope") is None


# -- polls ----------------------------------------------------------------------------------


async def test_record_polls_updates_active_rows(store: Store) -> None:
    await store.create_trackings([new(1), new(2)])
    body = {"JobId": "J-1", "Status": "Leased"}
    await store.record_polls(
        [
            poll("trk_1", 1, remote_status="Leased", remote=body, remote_changed=True),
            poll("trk_2", 4, last_error={"kind": "timeout"}),
        ]
    )
    one, two = await store.get_tracking("trk_1"), await store.get_tracking("trk_2")
    assert one is not None and two is not None
    assert (one.polls, one.last_polled_at, one.next_poll_at) == (1, 1_501.0, 1_601.0)
    assert one.remote_status == "Leased" and one.remote == body and one.last_error is None
    assert two.polls == 4 and two.last_error == {"kind": "timeout"} and two.remote is None


async def test_unchanged_remote_keeps_the_stored_body(store: Store) -> None:
    await store.create_trackings([new(1)])
    body = {"Status": "Leased", "Nested": [1, {"x": None}]}
    await store.record_polls(
        [poll("trk_1", 1, remote_status="Leased", remote=body, remote_changed=True)]
    )
    await store.record_polls([poll("trk_1", 2, remote_status="ignored", remote={"no": 1})])
    await store.record_polls([poll("trk_1", 3, last_error={"kind": "http_5xx", "status": 503})])
    await store.record_polls([poll("trk_1", 4)])  # a clean poll clears last_error
    got = await store.get_tracking("trk_1")
    assert got is not None
    assert got.polls == 4 and got.remote_status == "Leased" and got.remote == body
    assert got.last_error is None


async def test_several_updates_of_one_tracking_in_one_call_apply_in_turn(store: Store) -> None:
    await store.create_trackings([new(1), new(2), new(3)])
    first, second = {"Status": "Queued"}, {"Status": "Leased"}
    await store.record_polls(
        [
            poll("trk_1", 1, remote_status="Queued", remote=first, remote_changed=True),
            poll("trk_2", 1, last_error={"kind": "timeout"}),
            poll("trk_1", 2, last_error={"kind": "http_5xx"}),
            poll("trk_3", 1, remote_status="Queued", remote=first, remote_changed=True),
            poll("trk_1", 3, remote_status="Leased", remote=second, remote_changed=True),
            poll("trk_2", 2),
            poll("trk_1", 4),
            poll("trk_3", 2, last_error={"kind": "connection"}),
        ]
    )
    one, two, three = [await store.get_tracking(f"trk_{i}") for i in (1, 2, 3)]
    assert one is not None and two is not None and three is not None
    # The last changed body wins; the last update's counters and (absent) error too.
    assert (one.polls, one.remote_status, one.remote, one.last_error) == (4, "Leased", second, None)
    assert (two.polls, two.remote, two.last_error) == (2, None, None)
    assert (three.polls, three.remote_status, three.remote) == (2, "Queued", first)
    assert three.last_error == {"kind": "connection"}


async def test_many_poll_results_in_one_call(store: Store) -> None:
    # More rows than one bulk statement holds.
    await store.create_trackings([new(i) for i in range(300)])
    body = {"Status": "Queued"}
    await store.record_polls(
        [poll(f"trk_{i}", 7, remote_status="Queued", remote=body, remote_changed=True)
         for i in range(300)]
    )  # fmt: skip
    rows = await store.load_active()
    assert len(rows) == 300
    assert all(t.polls == 7 and t.remote == body for t in rows)


async def _digested_and_plain(store: Store, digested: Any, plain: Any) -> None:
    """trk_1 read once with a body its digest stands for, trk_2 with one it does not."""
    await store.record_polls(
        [
            poll("trk_1", 1, remote_status="Queued", remote=digested, remote_changed=True,
                 fingerprint="Queued:a", digest=b"d" * 16),
            poll("trk_2", 1, remote_status="Queued", remote=plain, remote_changed=True,
                 fingerprint="Queued:b", digest=None),
        ]
    )  # fmt: skip


async def test_a_digest_stands_for_the_body_when_resuming(store: Store) -> None:
    await store.create_trackings([new(1), new(2)])
    queued, waiting = {"Status": "Queued"}, {"Status": "Queued", "NextRunAt": "soon"}
    await _digested_and_plain(store, queued, waiting)
    await store.record_polls([poll("trk_1", 2)])  # unchanged: fingerprint and digest kept
    one, two = await store.load_active()
    # Resuming reads the fingerprint and digest instead of the body they stand for...
    assert (one.remote_fingerprint, one.remote_digest, one.remote) == ("Queued:a", b"d" * 16, None)
    # ...and the body itself where no digest does.
    assert (two.remote_fingerprint, two.remote_digest, two.remote) == ("Queued:b", None, waiting)
    # The API still reads the body.
    got = await store.get_tracking("trk_1")
    assert got is not None and got.remote == queued and got.polls == 2
    # A new body without a digest clears the old one.
    await store.record_polls(
        [poll("trk_1", 3, remote_status="Queued", remote=waiting, remote_changed=True,
              fingerprint="Queued:b", digest=None)]
    )  # fmt: skip
    one, _ = await store.load_active()
    assert (one.remote_digest, one.remote) == (None, waiting)


async def test_deadline_source_is_stored_and_a_derived_deadline_replaces_it(
    store: Store,
) -> None:
    await store.create_trackings([new(1), new(2, deadline_source="caller")])
    assert [(await store.get_tracking(f"trk_{n}")).deadline_source for n in (1, 2)] == [  # type: ignore[union-attr]
        "default",
        "caller",
    ]
    await store.record_polls([poll("trk_1", deadline=(5_000.0, "derived")), poll("trk_2")])
    one, two = await store.get_tracking("trk_1"), await store.get_tracking("trk_2")
    assert one is not None and (one.deadline_at, one.deadline_source) == (5_000.0, "derived")
    assert two is not None and (two.deadline_at, two.deadline_source) == (10_000.0, "caller")
    [loaded] = [t for t in await store.load_active(None, 10) if t.tracking_id == "trk_1"]
    assert (loaded.deadline_at, loaded.deadline_source) == (5_000.0, "derived")
    # Terminal rows keep theirs.
    await store.finish([finish("trk_2", "e-2")])
    await store.record_polls([poll("trk_2", deadline=(1.0, "derived"))])
    ended = await store.get_tracking("trk_2")
    assert ended is not None and (ended.deadline_at, ended.deadline_source) == (10_000.0, "caller")


async def test_the_work_class_is_stored_from_intake_and_replaced_by_a_poll(store: Store) -> None:
    await store.create_trackings([new(1, work_class="Build"), new(2), new(3, work_class="a.b")])
    created = {t.tracking_id: t for t in await store.load_active()}
    assert [(created[f"trk_{n}"].work_class, created[f"trk_{n}"].work_started_at)
            for n in (1, 2, 3)] == [("Build", None), (None, None), ("a.b", None)]  # fmt: skip
    # A poll that names the class (and the work's start) writes it, one that does not
    # keeps it; several in one call leave the last one given, with or without an event.
    changed = event("e-1", "trk_3", type="com.moltaro.orchestrator.tracking.status_changed")
    await store.record_polls(
        [
            poll("trk_1", 1, work_class="Check", work_started_at=990.0),
            poll("trk_1", 2),
            poll("trk_2", 1, work_class="fn.x", work_started_at=995.5),
            poll("trk_2", 2, work_class="fn.y", work_started_at=996.0),
            poll("trk_3", 1, work_class="a.c", work_started_at=999.0, event=changed),
        ]
    )
    loaded = {t.tracking_id: t for t in await store.load_active()}
    assert [(loaded[f"trk_{n}"].work_class, loaded[f"trk_{n}"].work_started_at)
            for n in (1, 2, 3)] == [("Check", 990.0), ("fn.y", 996.0), ("a.c", 999.0)]  # fmt: skip
    got = await store.get_tracking("trk_2")
    assert got is not None and (got.work_class, got.work_started_at) == ("fn.y", 996.0)
    # A terminal row keeps its own.
    await store.finish([finish("trk_1", "e-2")])
    await store.record_polls([poll("trk_1", 3, work_class="Build", work_started_at=1.0)])
    ended = await store.get_tracking("trk_1")
    assert ended is not None and (ended.work_class, ended.work_started_at) == ("Check", 990.0)


async def test_the_callers_trace_context_is_kept_as_given(store: Store) -> None:
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    [(made, _), _] = await store.create_trackings(
        [new(1, traceparent=parent, tracestate="k=v"), new(2)]
    )
    assert (made.traceparent, made.tracestate) == (parent, "k=v")
    loaded = {t.tracking_id: t for t in await store.load_active()}
    assert (loaded["trk_1"].traceparent, loaded["trk_1"].tracestate) == (parent, "k=v")
    assert (loaded["trk_2"].traceparent, loaded["trk_2"].tracestate) == (None, None)
    await store.record_polls([poll("trk_1", 1)])
    await store.finish([finish("trk_1", "e-1")])
    ended = await store.get_tracking("trk_1")
    assert ended is not None and (ended.traceparent, ended.tracestate) == (parent, "k=v")


async def test_many_classed_poll_results_in_one_call(store: Store) -> None:
    # More rows than one bulk statement holds, every one with a class.
    await store.create_trackings([new(i, work_class=f"fn.{i % 3}") for i in range(200)])
    await store.record_polls(
        [poll(f"trk_{i}", 2, work_class=f"fn.{i % 5}", work_started_at=900.0 + i)
         for i in range(200)]
    )  # fmt: skip
    rows = {t.tracking_id: t for t in await store.load_active()}
    assert len(rows) == 200
    assert all(
        (rows[f"trk_{i}"].work_class, rows[f"trk_{i}"].work_started_at)
        == (f"fn.{i % 5}", 900.0 + i)
        for i in range(200)
    )


async def test_record_polls_ignores_terminal_and_unknown_rows(store: Store) -> None:
    await store.create_trackings([new(1), new(2)])
    await store.finish([finish("trk_1", "evt_fin", "sink:a")])
    late = poll(
        "trk_1",
        9,
        remote_status="Leased",
        remote={"late": True},
        remote_changed=True,
        event=event("evt_late", "trk_1", "sink:a", type="x.status_changed"),
    )
    await store.record_polls([late, poll("trk_404", 1), poll("trk_2", 1)])
    one = await store.get_tracking("trk_1")
    assert one is not None and one.polls == 0 and one.remote is None and one.next_poll_at is None
    assert [e.event_id for e in await store.events_after(0, 10)] == ["evt_fin"]
    two = await store.get_tracking("trk_2")
    assert two is not None and two.polls == 1


async def test_status_changed_events_are_written_with_the_poll(store: Store) -> None:
    await store.create_trackings([new(1, notify="all")])
    await store.record_polls(
        [
            poll("trk_1", 1, event=event("evt_a", "trk_1", "sink:a", type="status_changed")),
            poll("trk_1", 2, event=event("evt_b", "trk_1", "sink:a", type="status_changed")),
        ]
    )
    events = await store.events_after(0, 10)
    assert [e.event_id for e in events] == ["evt_a", "evt_b"]
    assert events[0].seq < events[1].seq
    assert await store.outbox_pending_counts() == {"sink:a": 2}


# -- finish ---------------------------------------------------------------------------------


async def test_finish_moves_to_terminal_with_its_event_once(store: Store) -> None:
    await store.create_trackings([new(1, callback_url="http://127.0.0.1:1/cb")])
    item = finish("trk_1", "evt_1", "sink:a", "callback", "sink:a")
    item.event.callback_url = "http://127.0.0.1:1/cb"
    assert await store.finish([item]) == [True]
    assert await store.finish([finish("trk_1", "evt_other", "sink:a")]) == [False]
    got = await store.get_tracking("trk_1")
    assert got is not None
    assert (got.state, got.outcome, got.terminal_at) == ("terminal", "succeeded", 2_000.0)
    assert got.result == {"summary": "ok"} and got.next_poll_at is None
    [record] = await store.events_after(0, 10)
    assert (record.event_id, record.tracking_id, record.payload) == (
        "evt_1",
        "trk_1",
        b'{"id":"evt_1"}',
    )
    deliveries, _ = await store.list_deliveries(None, 10, None)
    assert sorted((d.destination, d.url) for d in deliveries) == [
        ("callback", "http://127.0.0.1:1/cb"),
        ("sink:a", None),
    ]
    assert all(d.state == "pending" and d.attempts == 0 for d in deliveries)
    assert all(d.event_id == "evt_1" and d.payload == record.payload for d in deliveries)


async def test_finish_keeps_poll_fields_when_it_carries_no_poll(store: Store) -> None:
    await store.create_trackings([new(1), new(2)])
    body = {"Status": "Running"}
    await store.record_polls(
        [
            poll(
                t,
                3,
                remote_status="Running",
                remote=body,
                remote_changed=True,
                last_error={"kind": "timeout"},
            )
            for t in ("trk_1", "trk_2")
        ]
    )
    final = {"Status": "Succeeded"}
    results = await store.finish(
        [
            finish("trk_1", "e1", outcome="abandoned", result=None),
            finish(
                "trk_2",
                "e2",
                polls=4,
                last_polled_at=1_999.0,
                remote_status="Succeeded",
                remote=final,
                remote_changed=True,
            ),
        ]
    )
    assert results == [True, True]
    one, two = await store.get_tracking("trk_1"), await store.get_tracking("trk_2")
    assert one is not None and two is not None
    assert (one.outcome, one.polls, one.remote, one.last_error) == (
        "abandoned",
        3,
        body,
        {"kind": "timeout"},
    )
    assert (two.polls, two.last_polled_at, two.remote_status, two.remote, two.last_error) == (
        4,
        1_999.0,
        "Succeeded",
        final,
        None,
    )


async def test_same_tracking_twice_in_one_finish_call(store: Store) -> None:
    await store.create_trackings([new(1)])
    assert await store.finish([finish("trk_1", "e1"), finish("trk_1", "e2")]) == [True, False]
    assert [e.event_id for e in await store.events_after(0, 10)] == ["e1"]


async def test_concurrent_finish_calls_produce_exactly_one_terminal_event(store: Store) -> None:
    await store.create_trackings([new(1)])
    outcomes = ["succeeded", "failed", "cancelled", "deadline_exceeded", "abandoned"] * 4
    results = await asyncio.gather(
        *(
            store.finish([finish("trk_1", f"evt_{i}", "sink:a", outcome=outcome)])
            for i, outcome in enumerate(outcomes)
        )
    )
    assert sum(r == [True] for r in results) == 1
    [winner] = [i for i, r in enumerate(results) if r == [True]]
    [record] = await store.events_after(0, 100)
    assert record.event_id == f"evt_{winner}"
    got = await store.get_tracking("trk_1")
    assert got is not None and got.outcome == outcomes[winner]
    assert await store.outbox_pending_counts() == {"sink:a": 1}


async def test_finish_with_a_reused_event_id_writes_nothing(store: Store) -> None:
    await store.create_trackings([new(1), new(2)])
    await store.finish([finish("trk_1", "evt_same")])
    with pytest.raises(StoreError):
        await store.finish([finish("trk_2", "evt_same")])
    two = await store.get_tracking("trk_2")
    assert two is not None and two.state == "active"
    assert len(await store.events_after(0, 10)) == 1


async def test_finish_of_an_unknown_tracking_is_false(store: Store) -> None:
    assert await store.finish([finish("trk_404", "e1")]) == [False]
    assert await store.events_after(0, 10) == []


# -- events ---------------------------------------------------------------------------------


async def test_event_log_is_ordered_and_paged_by_seq(store: Store) -> None:
    await store.create_trackings([new(i) for i in range(10)])
    assert await store.last_event_seq() == 0
    for i in range(10):
        await store.finish([finish(f"trk_{i}", f"evt_{i}")])
    events = await store.events_after(0, 100)
    assert [e.event_id for e in events] == [f"evt_{i}" for i in range(10)]
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == 10
    assert await store.last_event_seq() == seqs[-1]
    page = await store.events_after(seqs[2], 3)
    assert [e.seq for e in page] == seqs[3:6]
    assert await store.events_after(seqs[-1], 10) == []


async def test_seq_is_never_reused_after_prune(store: Store) -> None:
    await store.create_trackings([new(1), new(2)])
    await store.finish([finish("trk_1", "e1")])
    last = await store.last_event_seq()
    assert await store.prune(before=3_000.0, batch=10) == 1
    assert await store.events_after(0, 10) == []
    assert await store.last_event_seq() == last
    await store.finish([finish("trk_2", "e2")])
    [record] = await store.events_after(0, 10)
    assert record.seq > last


# -- reading trackings ----------------------------------------------------------------------


async def test_load_active_returns_only_active_rows(store: Store) -> None:
    await store.create_trackings([new(i) for i in range(5)])
    await store.finish([finish("trk_1", "e1"), finish("trk_3", "e3")])
    active = await store.load_active()
    assert sorted(t.tracking_id for t in active) == ["trk_0", "trk_2", "trk_4"]


async def test_load_active_pages_by_tracking_id(store: Store) -> None:
    await store.create_trackings([new(i) for i in range(12)])
    await store.finish([finish("trk_5", "e5")])
    pages: list[list[str]] = []
    after = None
    while page := await store.load_active(after=after, limit=4):
        pages.append([t.tracking_id for t in page])
        after = page[-1].tracking_id
    seen = [tid for p in pages for tid in p]
    assert seen == sorted(seen) and len(seen) == 11 and "trk_5" not in seen
    assert [len(p) for p in pages] == [4, 4, 3]


async def test_load_active_pages_read_what_one_load_reads(store: Store) -> None:
    await store.create_trackings([new(1), new(2), new(3, labels={"team": "billing"})])
    body = {"Status": "Queued"}
    await _digested_and_plain(store, body, body)
    paged = await store.load_active(limit=2)
    paged += await store.load_active(after=paged[-1].tracking_id, limit=2)
    assert paged == await store.load_active()
    # A digest stands for its body there too; the body is read where none does.
    assert [(t.remote_digest, t.remote) for t in paged[:2]] == [(b"d" * 16, None), (None, body)]


async def test_active_counts_per_workspace(store: Store) -> None:
    await store.create_trackings(
        [new(i, workspace="default" if i % 3 else "other") for i in range(9)]
    )
    await store.finish([finish("trk_1", "e1"), finish("trk_3", "e3")])
    assert await store.active_counts() == {"default": 5, "other": 2}
    await store.finish([finish(f"trk_{i}", f"f{i}") for i in (0, 6)])
    assert await store.active_counts() == {"default": 5}


async def _seed_for_listing(store: Store) -> None:
    items = [
        new(
            i,
            created_at=1_000.0 + i // 3,  # three rows share each created_at: the tie-break counts
            kind="function_job" if i % 2 else "workspace_ui_build",
            workspace="default" if i % 5 else "other",
            labels={"team": "billing" if i % 3 else "search", "env": "prod" if i < 20 else "dev"},
        )
        for i in range(30)
    ]
    await store.create_trackings(items)
    await store.finish([finish(f"trk_{i}", f"e{i}", outcome="failed") for i in range(0, 30, 4)])


async def _all_pages(store: Store, query: TrackingQuery) -> list[str]:
    seen: list[str] = []
    while True:
        items, cursor = await store.list_trackings(query)
        assert len(items) <= query.limit
        seen.extend(t.tracking_id for t in items)
        if cursor is None:
            return seen
        query.cursor = cursor


@pytest.mark.parametrize("limit", [1, 4, 7, 30, 100])
async def test_paging_is_newest_first_without_gaps_or_repeats(store: Store, limit: int) -> None:
    await _seed_for_listing(store)
    seen = await _all_pages(store, TrackingQuery(limit=limit))
    expected = sorted(
        (f"trk_{i}" for i in range(30)),
        key=lambda tid: (1_000.0 + int(tid[4:]) // 3, tid),
        reverse=True,
    )
    assert seen == expected


async def test_list_filters(store: Store) -> None:
    await _seed_for_listing(store)

    async def ids(**filters: Any) -> set[str]:
        return set(await _all_pages(store, TrackingQuery(limit=5, **filters)))

    def where(pred: Any) -> set[str]:
        return {f"trk_{i}" for i in range(30) if pred(i)}

    assert await ids(state="terminal") == where(lambda i: i % 4 == 0)
    assert await ids(state="active") == where(lambda i: i % 4)
    assert await ids(outcome="failed") == where(lambda i: i % 4 == 0)
    assert await ids(kind="function_job") == where(lambda i: i % 2)
    assert await ids(workspace="other") == where(lambda i: i % 5 == 0)
    assert await ids(labels={"team": "search"}) == where(lambda i: i % 3 == 0)
    assert await ids(labels={"team": "search", "env": "dev"}) == where(
        lambda i: i % 3 == 0 and i >= 20
    )
    assert await ids(labels={"team": "search", "missing": "x"}) == set()
    assert await ids(state="active", kind="function_job", labels={"env": "prod"}) == where(
        lambda i: i % 4 and i % 2 and i < 20
    )


async def test_list_limit_is_capped_and_bad_cursors_refused(store: Store) -> None:
    await store.create_trackings([new(i) for i in range(1_005)])
    items, cursor = await store.list_trackings(TrackingQuery(limit=5_000))
    assert len(items) == 1_000 and cursor is not None
    items, cursor = await store.list_trackings(TrackingQuery(limit=0))
    assert len(items) == 1 and cursor is not None
    for bad in ("not-a-cursor!", "eyJ4IjoxfQ", ""):
        with pytest.raises(InvalidCursor):
            await store.list_trackings(TrackingQuery(cursor=bad))


async def test_returned_objects_are_copies(store: Store) -> None:
    await store.create_trackings([new(1, labels={"a": "1"})])
    got = await store.get_tracking("trk_1")
    assert got is not None
    got.labels["a"] = "mutated"
    got.state = "terminal"
    again = await store.get_tracking("trk_1")
    assert again is not None and again.labels == {"a": "1"} and again.state == "active"


# -- deliveries -----------------------------------------------------------------------------


async def _terminal_with_deliveries(store: Store, count: int, *destinations: str) -> None:
    await store.create_trackings([new(i) for i in range(count)])
    for i in range(count):
        item = finish(f"trk_{i}", f"evt_{i}", *destinations)
        item.event.time = 2_000.0 + i
        await store.finish([item])


async def test_claim_takes_due_deliveries_oldest_first_under_a_lease(store: Store) -> None:
    await _terminal_with_deliveries(store, 5, "sink:a", "sink:b")
    assert await store.pending_destinations() == ["sink:a", "sink:b"]
    assert await store.claim_deliveries("sink:a", now=1_999.0, limit=10, lease_s=30) == []
    claimed = await store.claim_deliveries("sink:a", now=2_003.0, limit=3, lease_s=30)
    assert [d.event_id for d in claimed] == ["evt_0", "evt_1", "evt_2"]
    assert all(d.destination == "sink:a" and d.next_attempt_at == 2_033.0 for d in claimed)
    # Leased: not handed out again until the lease runs out, unless the worker reports back.
    rest = await store.claim_deliveries("sink:a", now=2_010.0, limit=10, lease_s=30)
    assert [d.event_id for d in rest] == ["evt_3", "evt_4"]
    assert await store.claim_deliveries("sink:a", now=2_032.0, limit=10, lease_s=30) == []
    again = await store.claim_deliveries("sink:a", now=2_033.0, limit=10, lease_s=30)
    assert [d.event_id for d in again] == ["evt_0", "evt_1", "evt_2"]
    assert await store.outbox_pending_counts() == {"sink:a": 5, "sink:b": 5}


async def test_replay_sends_a_range_again_to_one_destination(store: Store) -> None:
    await _terminal_with_deliveries(store, 5, "sink:a", "sink:b")
    for d in await store.claim_deliveries("sink:a", now=3_000.0, limit=10, lease_s=30):
        await store.mark_delivered(d.delivery_id, at=3_001.0, status=200)
    records = await store.events_after(0, 10)
    seqs = [r.seq for r in records]
    # By seq: (seqs[0], seqs[2]] is the 2nd and 3rd event.
    n = await store.replay_deliveries("sink:a", ReplaySpan(seqs[0], seqs[2]), now=5_000.0)
    assert n == 2
    due = await store.claim_deliveries("sink:a", now=5_000.0, limit=10, lease_s=30)
    assert [d.event_id for d in due] == ["evt_1", "evt_2"]
    assert all(d.attempts == 0 and d.delivered_at is None for d in due)
    # sink:b is untouched: all five still pending from the start, none replayed twice.
    assert await store.outbox_pending_counts() == {"sink:a": 2, "sink:b": 5}
    # By time, to a destination that never had these events: new deliveries.
    n = await store.replay_deliveries("sink:c", ReplaySpan(since=2_003.0), now=5_000.0)
    assert n == 2
    fresh = await store.claim_deliveries("sink:c", now=5_000.0, limit=10, lease_s=30)
    assert [d.event_id for d in fresh] == ["evt_3", "evt_4"]
    assert [d.payload for d in fresh] == [r.payload for r in records[3:]]
    assert await store.replay_deliveries("sink:a", ReplaySpan(since=9_000.0), now=5_000.0) == 0


async def test_retry_dead_redrive_and_delivered(store: Store) -> None:
    await _terminal_with_deliveries(store, 3, "sink:a")
    d0, d1, d2 = await store.claim_deliveries("sink:a", now=3_000.0, limit=10, lease_s=900)

    await store.mark_retry(d0.delivery_id, next_attempt_at=3_100.0, status=503, error="down")
    retried = await store.get_delivery(d0.delivery_id)
    assert retried is not None
    assert (retried.state, retried.attempts, retried.next_attempt_at) == ("pending", 1, 3_100.0)
    assert (retried.last_status, retried.last_error) == (503, "down")
    assert await store.claim_deliveries("sink:a", now=3_099.0, limit=10, lease_s=30) == []
    [due] = await store.claim_deliveries("sink:a", now=3_100.0, limit=10, lease_s=30)
    assert due.delivery_id == d0.delivery_id and due.attempts == 1

    await store.mark_dead(d1.delivery_id, at=3_001.0, status=410, error="gone")
    await store.mark_delivered(d2.delivery_id, at=3_002.0, status=204)
    delivered = await store.get_delivery(d2.delivery_id)
    assert delivered is not None
    assert (delivered.state, delivered.delivered_at, delivered.last_status) == (
        "delivered",
        3_002.0,
        204,
    )
    assert delivered.attempts == 1
    assert await store.outbox_pending_counts() == {"sink:a": 1}

    # Reports about a delivery that is no longer pending change nothing.
    await store.mark_retry(d2.delivery_id, next_attempt_at=9_999.0, status=500, error="late")
    await store.mark_dead(d2.delivery_id, at=9_999.0, status=500, error="late")
    assert await store.get_delivery(d2.delivery_id) == delivered

    dead, _ = await store.list_deliveries("dead", 10, None)
    assert [(d.delivery_id, d.attempts, d.last_status) for d in dead] == [(d1.delivery_id, 1, 410)]
    assert await store.redrive_delivery(d2.delivery_id, now=4_000.0) is None
    assert await store.redrive_delivery(d0.delivery_id, now=4_000.0) is None
    revived = await store.redrive_delivery(d1.delivery_id, now=4_000.0)
    assert revived is not None
    assert (revived.state, revived.next_attempt_at, revived.attempts) == ("pending", 4_000.0, 1)
    claimed = await store.claim_deliveries("sink:a", now=4_000.0, limit=10, lease_s=30)
    assert d1.delivery_id in {d.delivery_id for d in claimed}
    assert await store.list_deliveries("dead", 10, None) == ([], None)
    assert await store.get_delivery(999_999) is None


async def test_list_deliveries_by_state_oldest_first_in_pages(store: Store) -> None:
    await _terminal_with_deliveries(store, 7, "sink:a", "callback")
    everything, _ = await store.list_deliveries(None, 1_000, None)
    assert len(everything) == 14
    for d in everything[::3]:
        await store.mark_dead(d.delivery_id, at=5_000.0, status=None, error="timeout")

    for state in ("pending", "dead", None):
        seen: list[int] = []
        cursor: str | None = None
        while True:
            page, cursor = await store.list_deliveries(state, 2, cursor)
            assert len(page) <= 2
            seen.extend(d.delivery_id for d in page)
            if cursor is None:
                break
        expected = [d.delivery_id for d in everything]
        if state is not None:
            dead_ids = {d.delivery_id for d in everything[::3]}
            expected = [i for i in expected if (i in dead_ids) == (state == "dead")]
        assert seen == expected


# -- sink states and operational events ---------------------------------------------------


def sink_event(event_id: str, about: str, *destinations: str, time: float = 2_500.0) -> NewEvent:
    return event(
        event_id,
        None,
        *destinations,
        sink=about,
        type="com.moltaro.orchestrator.sink.disabled",
        time=time,
    )


async def test_a_disabled_sink_is_recorded_once_with_its_event(store: Store) -> None:
    assert await store.disabled_sinks() == []
    gone = DisabledSink("sink:a", 2_500.0, "HTTP 410")
    assert await store.disable_sink(gone, sink_event("op_1", "sink:a", "sink:b", "sink:c"))
    # Already disabled: neither the state nor a second event is written.
    later = DisabledSink("sink:a", 2_600.0, "again")
    assert not await store.disable_sink(later, sink_event("op_2", "sink:a", "sink:b"))
    assert await store.disabled_sinks() == [gone]
    [record] = await store.events_after(0, 10)
    assert (record.event_id, record.tracking_id, record.sink) == ("op_1", None, "sink:a")
    assert await store.outbox_pending_counts() == {"sink:b": 1, "sink:c": 1}
    [due] = await store.claim_deliveries("sink:b", now=2_500.0, limit=10, lease_s=30)
    assert due.event_id == "op_1" and due.payload == record.payload

    other = DisabledSink("sink:b", 2_700.0, "no success")
    assert await store.disable_sink(other, sink_event("op_3", "sink:b", "sink:a"))
    assert await store.disabled_sinks() == [gone, other]
    enabled = sink_event("op_4", "sink:a", "sink:b", "sink:c")
    assert await store.enable_sink("sink:a", enabled)
    assert not await store.enable_sink("sink:a", sink_event("op_5", "sink:a", "sink:b"))
    assert await store.disabled_sinks() == [other]
    assert [e.event_id for e in await store.events_after(0, 10)] == ["op_1", "op_3", "op_4"]
    # A reused event id fails the whole operation: the sink stays as it was.
    with pytest.raises(StoreError):
        await store.enable_sink("sink:b", sink_event("op_1", "sink:b"))
    assert await store.disabled_sinks() == [other]


async def test_operational_events_share_the_log_with_tracking_events(store: Store) -> None:
    await _terminal_with_deliveries(store, 2, "sink:a", "sink:b")
    await store.disable_sink(
        DisabledSink("sink:a", 2_500.0, "HTTP 410"), sink_event("op_1", "sink:a", "sink:b")
    )
    await store.create_trackings([new(9)])
    await store.finish([finish("trk_9", "evt_9", "sink:a", "sink:b")])
    records = await store.events_after(0, 10)
    assert [r.event_id for r in records] == ["evt_0", "evt_1", "op_1", "evt_9"]
    assert [r.tracking_id for r in records] == ["trk_0", "trk_1", None, "trk_9"]
    # A replay to the disabled sink leaves out the event about itself; to another
    # sink it is sent again like any event.
    assert await store.replay_deliveries("sink:a", ReplaySpan(), now=5_000.0) == 3
    # Nothing is claimed for a disabled sink; once enabled, what waited for it.
    assert await store.claim_deliveries("sink:a", now=5_000.0, limit=10, lease_s=30) == []
    assert await store.enable_sink("sink:a", sink_event("op_2", "sink:a", "sink:b"))
    to_a = await store.claim_deliveries("sink:a", now=5_000.0, limit=10, lease_s=30)
    assert [d.event_id for d in to_a] == ["evt_0", "evt_1", "evt_9"]
    assert await store.replay_deliveries("sink:b", ReplaySpan(), now=5_000.0) == 5


async def test_settled_operational_events_are_pruned_by_age(store: Store) -> None:
    for i, (about, at) in enumerate(
        [("sink:a", 2_000.0), ("sink:b", 2_001.0), ("sink:c", 2_002.0)]
    ):
        sink = DisabledSink(about, at, "x")
        await store.disable_sink(sink, sink_event(f"op_{i}", about, "sink:z", time=at))
    [op_0, op_1, _] = await store.claim_deliveries("sink:z", now=3_000.0, limit=10, lease_s=30)
    await store.mark_delivered(op_0.delivery_id, at=3_000.0, status=200)
    await store.mark_dead(op_1.delivery_id, at=3_000.0, status=500, error="x")
    # op_2 is still pending (kept whatever its age); before=2_000.5 keeps op_1 by age.
    assert await store.prune(before=2_000.5, batch=10) == 1
    assert [e.event_id for e in await store.events_after(0, 10)] == ["op_1", "op_2"]
    assert await store.prune(before=9_000.0, batch=10) == 1
    assert [e.event_id for e in await store.events_after(0, 10)] == ["op_2"]
    everything, _ = await store.list_deliveries(None, 100, None)
    assert [d.event_id for d in everything] == ["op_2"]
    # The disabled states are not retention's business.
    assert len(await store.disabled_sinks()) == 3


# -- retention ------------------------------------------------------------------------------


async def test_prune_deletes_old_settled_trackings_in_batches(store: Store) -> None:
    await store.create_trackings([new(i) for i in range(8)])
    for i in range(6):
        await store.finish([finish(f"trk_{i}", f"evt_{i}", "sink:a", terminal_at=2_000.0 + i)])
    deliveries, _ = await store.list_deliveries(None, 100, None)
    by_event = {d.event_id: d for d in deliveries}
    for i in (0, 1, 2):
        await store.mark_delivered(by_event[f"evt_{i}"].delivery_id, at=2_100.0, status=200)
    await store.mark_dead(by_event["evt_3"].delivery_id, at=2_100.0, status=None, error="x")
    # evt_4 stays pending; trk_5 is too recent; trk_6 and trk_7 are active.

    assert await store.prune(before=2_005.0, batch=2) == 2
    assert await store.prune(before=2_005.0, batch=2) == 2
    assert await store.prune(before=2_005.0, batch=2) == 0

    remaining = set(await _all_pages(store, TrackingQuery(limit=100)))
    assert remaining == {"trk_4", "trk_5", "trk_6", "trk_7"}
    assert [e.event_id for e in await store.events_after(0, 100)] == ["evt_4", "evt_5"]
    left, _ = await store.list_deliveries(None, 100, None)
    assert sorted(d.event_id for d in left) == ["evt_4", "evt_5"]
    # A new tracking may reuse a pruned remote id.
    [(_, is_new)] = await store.create_trackings([new("again", remote_id="J-0")])
    assert is_new


# -- adaptive polling's work classes ---------------------------------------------------------


def summary(cls: str, n: int, **overrides: Any) -> WorkClassSummary:
    fields: dict[str, Any] = {
        "workspace": "default",
        "kind": "function_job",
        "work_class": cls,
        "summary": {"v": 1, "n": n, "bins": {"12": 1.5, "13": 0.25}},
        "updated_at": 1_000.0 + n,
    }
    fields.update(overrides)
    return WorkClassSummary(**fields)


def put(item: WorkClassSummary) -> WorkClassMerge:
    """A merge that replaces whatever is stored with ``item``."""
    return WorkClassMerge(
        item.workspace, item.kind, item.work_class, lambda _: item.summary, item.updated_at
    )


def add(cls: str, writer: str, n: int, at: float = 2_000.0) -> WorkClassMerge:
    """A merge that adds ``n`` to the stored count and ``writer`` to the stored writers:
    what a learner's delta does to its histogram, in a form a test can read back."""

    def fold(stored: dict[str, Any] | None) -> dict[str, Any]:
        old = stored or {"n": 0, "writers": []}
        return {"n": old["n"] + n, "writers": [*old["writers"], writer]}

    return WorkClassMerge("default", "function_job", cls, fold, at)


async def test_work_classes_start_empty(store: Store) -> None:
    assert await store.load_work_classes() == []
    assert await store.merge_work_classes([], []) == []  # nothing to do is harmless


async def test_work_classes_are_stored_by_workspace_kind_and_class(store: Store) -> None:
    await store.merge_work_classes([put(summary("a", 1)), put(summary("b", 2))])
    stored = await store.merge_work_classes(
        [put(summary("a", 3)), put(summary("a", 4, kind="net_operation_build"))]
    )
    assert sorted(stored, key=lambda w: w.kind) == [
        summary("a", 3), summary("a", 4, kind="net_operation_build")
    ]  # fmt: skip
    found = {(w.workspace, w.kind, w.work_class): w for w in await store.load_work_classes()}
    assert set(found) == {
        ("default", "function_job", "a"),
        ("default", "function_job", "b"),
        ("default", "net_operation_build", "a"),
    }
    assert found["default", "function_job", "a"] == summary("a", 3)
    assert found["default", "function_job", "b"].summary == summary("b", 2).summary


async def test_a_merge_folds_into_what_is_stored_and_returns_it(store: Store) -> None:
    [first] = await store.merge_work_classes([add("a", "one", 2, at=1.0)])
    assert first.summary == {"n": 2, "writers": ["one"]}  # no row yet: folded from None
    [second] = await store.merge_work_classes([add("a", "two", 3, at=2.0)])
    assert second == WorkClassSummary(
        "default", "function_job", "a", {"n": 5, "writers": ["one", "two"]}, 2.0
    )
    assert await store.load_work_classes() == [second]


async def test_two_writers_deltas_both_survive(store: Store) -> None:
    # Concurrent merges of the same classes (on PostgreSQL, on separate connections):
    # each waits for the row, so none is lost to a last writer.
    writers = [f"w{n}" for n in range(8)]
    await asyncio.gather(
        *(store.merge_work_classes([add("a", w, 1), add("b", w, 10)]) for w in writers)
    )
    found = {w.work_class: w.summary for w in await store.load_work_classes()}
    assert found["a"]["n"] == 8 and found["b"]["n"] == 80
    assert sorted(found["a"]["writers"]) == sorted(found["b"]["writers"]) == writers


async def test_forgotten_work_classes_are_deleted_with_the_same_merge(store: Store) -> None:
    await store.merge_work_classes([put(summary("a", 1)), put(summary("b", 2))])
    await store.merge_work_classes([put(summary("c", 3))], [("default", "function_job", "a")])
    await store.merge_work_classes([], [("default", "function_job", "nothing-here")])
    names = sorted(w.work_class for w in await store.load_work_classes())
    assert names == ["b", "c"]
    # A class forgotten and merged again starts from nothing.
    await store.merge_work_classes([], [("default", "function_job", "b")])
    [again] = await store.merge_work_classes([add("b", "x", 1)])
    assert again.summary == {"n": 1, "writers": ["x"]}


async def test_a_loaded_summary_is_a_copy(store: Store) -> None:
    await store.merge_work_classes([put(summary("a", 1))])
    [loaded] = await store.load_work_classes()
    loaded.summary["n"] = 99
    [again] = await store.load_work_classes()
    assert again.summary["n"] == 1


# -- availability ---------------------------------------------------------------------------


async def test_writable_then_closed(store: Store) -> None:
    assert await store.check_writable()
    await store.create_trackings([new(1)])
    await store.close()
    with pytest.raises(StoreUnavailable):
        await store.create_trackings([new(2)])
    with pytest.raises(StoreUnavailable):
        await store.get_tracking("trk_1")
    with pytest.raises(StoreUnavailable):
        await store.load_active(limit=10)
    assert not await store.check_writable()


async def test_one_pass_over_the_active_trackings_reads_them_as_load_active(store: Store) -> None:
    labelled = new(2, labels={"team": "billing"}, correlation_id="c-2", group_name="g-1")
    await store.create_trackings([new(1), labelled, new(3), new(4)])
    await _digested_and_plain(store, {"Status": "Queued"}, {"Status": "Queued", "NextRunAt": "x"})
    error = {"kind": "timeout", "message": "slow"}
    await store.record_polls([poll("trk_3", 2, last_error=error)])
    await store.finish([finish("trk_4", "evt-4")])
    chunks = [chunk async for chunk in store.active_chunks(2)]
    assert all(1 <= len(chunk) <= 2 for chunk in chunks)
    passed = {t.tracking_id: t for chunk in chunks for t in chunk}
    assert sorted(passed) == ["trk_1", "trk_2", "trk_3"]
    for t in await store.load_active():
        # Everything a resume reads is the same (its stored next poll it does not need).
        unplanned = dataclasses.replace(passed[t.tracking_id], next_poll_at=None)
        assert unplanned == dataclasses.replace(t, next_poll_at=None)
