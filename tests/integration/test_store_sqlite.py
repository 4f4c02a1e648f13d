"""What only the SQLite store has to show: durability, migrations, group commit, the file lock."""

from __future__ import annotations

import asyncio
import importlib.resources
import logging
import os
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from orchestrator.errors import StoreError, StoreLocked, StoreUnavailable
from orchestrator.store import (
    Finish,
    NewEvent,
    NewTracking,
    PollUpdate,
    SqliteStore,
    TrackingQuery,
    open_store,
)

REPO = Path(__file__).resolve().parents[2]


def new(n: int | str, **overrides: object) -> NewTracking:
    item = NewTracking(
        tracking_id=f"trk_{n}",
        workspace="default",
        kind="function_job",
        remote_id=f"J-{n}",
        deadline_at=10_000.0,
        created_at=1_000.0,
        next_poll_at=1_001.0,
    )
    for key, value in overrides.items():
        setattr(item, key, value)
    return item


def finish(tracking_id: str, event_id: str, *destinations: str) -> Finish:
    return Finish(
        tracking_id=tracking_id,
        outcome="succeeded",
        terminal_at=2_000.0,
        result={"summary": "ok"},
        event=NewEvent(event_id, tracking_id, "t", 2_000.0, b"{}", list(destinations)),
    )


async def test_reopen_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "store.db"  # parents are created
    store = await open_store(path)
    await store.create_trackings([new(i, labels={"team": str(i % 2)}) for i in range(5)])
    body = {"Status": "Leased", "Run": {"Status": "Pending"}}
    await store.record_polls(
        [PollUpdate("trk_1", 3, 1_500.0, 1_600.0, "Leased", body, True, {"kind": "timeout"})]
    )
    await store.finish([finish("trk_0", "evt_0", "sink:a", "sink:b")])
    [claimed] = await store.claim_deliveries("sink:a", 3_000.0, 10, 30)
    await store.mark_dead(claimed.delivery_id, 3_001.0, 410, "gone")
    before = (
        await store.list_trackings(TrackingQuery(limit=100)),
        await store.events_after(0, 100),
        await store.list_deliveries(None, 100, None),
        await store.last_event_seq(),
    )
    await store.close()

    reopened = await open_store(path)
    after = (
        await reopened.list_trackings(TrackingQuery(limit=100)),
        await reopened.events_after(0, 100),
        await reopened.list_deliveries(None, 100, None),
        await reopened.last_event_seq(),
    )
    assert after == before
    one = await reopened.get_tracking("trk_1")
    assert one is not None and one.remote == body and one.last_error == {"kind": "timeout"}
    await reopened.finish([finish("trk_1", "evt_1", "sink:a")])
    assert await reopened.last_event_seq() > before[3]
    await reopened.close()


async def test_the_wal_file_is_cut_back_after_a_burst_and_removed_at_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = 128 * 1024
    monkeypatch.setattr("orchestrator.store.sqlite.WAL_LIMIT_BYTES", limit)
    path = tmp_path / "store.db"
    wal = Path(str(path) + "-wal")
    store = await open_store(path)
    try:
        # One batch big enough that its commit alone outgrows the limit and
        # SQLite's automatic checkpoint (1,000 pages).
        await store.create_trackings([new(i, labels={"pad": "x" * 400}) for i in range(6000)])
        assert wal.stat().st_size > 4096 * 1000
        # The commit checkpointed the log; the next writes start it again from
        # its beginning, which is when the file is cut back.
        await store.create_trackings([new("after-1")])
        await store.create_trackings([new("after-2")])
        assert wal.stat().st_size <= limit
        assert (await store.get_tracking("trk_after-2")) is not None
    finally:
        await store.close()
    # A clean close checkpoints everything and removes the file.
    assert not wal.exists()
    reopened = await open_store(path)
    try:
        assert (await reopened.get_tracking("trk_after-2")) is not None
    finally:
        await reopened.close()


async def test_migrations_apply_once_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    for _ in range(3):
        store = SqliteStore(path)
        await store.open()
        await store.create_trackings([new(1)])
        await store.close()
    with sqlite3.connect(path) as conn:
        versions = conn.execute("SELECT version, name FROM schema_version").fetchall()
        assert versions == [
            (1, "001_init.sql"),
            (2, "002_remote_digest.sql"),
            (3, "003_active_workspace.sql"),
            (4, "004_sink_events.sql"),
            (5, "005_deadline_source.sql"),
            (6, "006_work_classes.sql"),
            (7, "007_tracking_work_class.sql"),
            (8, "008_trace_context.sql"),
            (9, "009_groups.sql"),
        ]
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT count(*) FROM trackings").fetchone()[0] == 1
    conn.close()


async def test_a_version_1_store_is_upgraded_with_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    init = (
        importlib.resources.files("orchestrator.store") / "migrations" / "001_init.sql"
    ).read_text()
    with sqlite3.connect(path) as conn:
        conn.executescript(init)
        conn.execute(
            "CREATE TABLE schema_version"
            " (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
        )
        conn.execute("INSERT INTO schema_version VALUES (1, '001_init.sql', 0)")
        conn.execute(
            "INSERT INTO trackings (tracking_id, workspace, kind, remote_id, state,"
            " remote_status, remote, polls, deadline_at, created_at, labels, notify)"
            " VALUES ('trk_old', 'default', 'function_job', 'J-old', 'active', 'Queued',"
            " '{\"Status\":0}', 3, 9999999999, 1000, '{}', 'terminal')"
        )
    conn.close()
    store = SqliteStore(path)
    await store.open()
    try:
        [old] = await store.load_active()
        assert old.tracking_id == "trk_old" and old.polls == 3
        # No digest stands for the old body: it is read, as before the upgrade.
        assert old.remote == {"Status": 0} and old.remote_digest is None
    finally:
        await store.close()


async def test_a_version_3_store_keeps_its_events_deliveries_and_seq_through_004(
    tmp_path: Path,
) -> None:
    """004 rebuilds the events table: nothing may cascade to the deliveries, and the
    seq high-water mark (the newest event already pruned) must survive."""
    path = tmp_path / "store.db"
    migrations = importlib.resources.files("orchestrator.store") / "migrations"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(
            "CREATE TABLE schema_version"
            " (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
        )
        names = ["001_init.sql", "002_remote_digest.sql", "003_active_workspace.sql"]
        for version, name in enumerate(names, 1):
            conn.executescript((migrations / name).read_text())
            conn.execute("INSERT INTO schema_version VALUES (?, ?, 0)", (version, name))
        for n in (1, 2):
            conn.execute(
                "INSERT INTO trackings (tracking_id, workspace, kind, remote_id, state,"
                " outcome, deadline_at, created_at, terminal_at, labels, notify) VALUES"
                " (?, 'default', 'function_job', ?, 'terminal', 'succeeded', 9e9, 1000,"
                " 2000, '{}', 'terminal')",
                (f"trk_{n}", f"J-{n}"),
            )
            conn.execute(
                "INSERT INTO events (event_id, tracking_id, type, time, payload)"
                " VALUES (?, ?, 't', 2000, x'7b7d')",
                (f"e{n}", f"trk_{n}"),
            )
        conn.execute(
            "INSERT INTO deliveries (event_seq, destination, state, next_attempt_at,"
            " created_at) VALUES (1, 'sink:a', 'pending', 2000, 2000)"
        )
        conn.execute("DELETE FROM trackings WHERE tracking_id = 'trk_2'")  # seq 2 pruned
    conn.close()
    store = SqliteStore(path)
    await store.open()
    try:
        [record] = await store.events_after(0, 10)
        assert (record.seq, record.event_id, record.sink) == (1, "e1", None)
        assert await store.last_event_seq() == 2
        [delivery], _ = await store.list_deliveries("pending", 10, None)
        assert delivery.event_id == "e1"  # the rebuild cascaded nothing
        await store.create_trackings([new(3)])
        await store.finish([finish("trk_3", "e3", "sink:a")])
        assert [r.seq for r in await store.events_after(0, 10)] == [1, 3]
        # Foreign keys are on again after the migration: a tracking's deletion cascades.
        await store.mark_delivered(delivery.delivery_id, at=3_000.0, status=200)
        assert await store.prune(before=9e9, batch=10) == 1
        assert [r.event_id for r in await store.events_after(0, 10)] == ["e3"]
        left, _ = await store.list_deliveries(None, 10, None)
        assert [d.event_id for d in left] == ["e3"]
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.close()


async def test_an_sqlite_too_old_for_the_bulk_writes_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 34, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.34.1")
    with pytest.raises(StoreError, match=r"SQLite 3\.34\.1 is too old: the store needs 3\.35\.0"):
        await SqliteStore(tmp_path / "store.db").open()
    assert not (tmp_path / "store.db").exists()  # refused before anything was written


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = SqliteStore(path)
    await store.open()
    await store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO schema_version VALUES (999, '999_future.sql', 0)")
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        await SqliteStore(path).open()
    # The refused open left the file usable for a build that knows the schema.
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM schema_version WHERE version = 999")
    conn.close()
    again = SqliteStore(path)
    await again.open()
    await again.close()


async def test_group_commit_batches_concurrent_writes(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "store.db")
    await store.open()
    await store.create_trackings([new(i) for i in range(2_000)])
    start = store.stats()
    await asyncio.gather(
        *(store.record_polls([PollUpdate(f"trk_{i}", 1, 1.0, 2.0)]) for i in range(2_000))
    )
    end = store.stats()
    operations = end["operations"] - start["operations"]
    transactions = end["transactions"] - start["transactions"]
    assert operations == 2_000
    assert transactions * 20 <= operations
    active = await store.load_active()
    assert {t.polls for t in active} == {1}
    await store.close()


async def test_a_failing_operation_fails_alone_in_its_batch(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "store.db")
    await store.open()
    await store.create_trackings([new("taken")])
    start = store.stats()["transactions"]
    results = await asyncio.gather(
        store.create_trackings([new(1)]),
        store.create_trackings([new("taken", remote_id="J-clash")]),  # tracking_id collision
        store.create_trackings([new(2)]),
        return_exceptions=True,
    )
    assert isinstance(results[1], StoreError) and not isinstance(results[1], StoreUnavailable)
    assert not isinstance(results[0], BaseException) and not isinstance(results[2], BaseException)
    assert store.stats()["transactions"] - start == 1  # one shared transaction
    assert {t.tracking_id for t in await store.load_active()} == {"trk_taken", "trk_1", "trk_2"}
    await store.close()


async def test_a_second_store_on_the_same_file_is_locked_out(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    first = SqliteStore(path)
    await first.open()
    second = SqliteStore(path)
    with pytest.raises(StoreLocked) as caught:
        await second.open()
    message = str(caught.value)
    assert str(path) in message and "\n" not in message
    await first.create_trackings([new(1)])  # the holder is unaffected
    await first.close()
    await second.open()
    assert await second.get_tracking("trk_1") is not None
    await second.close()


class _Boom(BaseException):
    """Something no operation is expected to raise: it takes the writer task down."""


def _explode(conn: sqlite3.Connection) -> None:
    raise _Boom("injected")


async def test_a_dead_writer_is_loud_and_fails_every_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SqliteStore(tmp_path / "store.db")
    await store.open()
    await store.create_trackings([new(1)])
    writer = store._writer
    assert writer is not None
    with caplog.at_level(logging.ERROR, logger="orchestrator.store"):
        results = await asyncio.gather(
            writer.submit(_explode),
            store.create_trackings([new(2)]),
            return_exceptions=True,
        )
    assert all(isinstance(r, StoreUnavailable) for r in results)
    assert isinstance(store.writer_failure, _Boom)
    assert any("died" in r.getMessage() for r in caplog.records)
    with pytest.raises(StoreUnavailable):
        await store.record_polls([PollUpdate("trk_1", 1, 1.0, 2.0)])
    assert not await store.check_writable()
    assert await store.get_tracking("trk_1") is not None  # reads still answer
    await store.close()


CHILD = """
import asyncio, sys
from orchestrator.store import Finish, NewEvent, NewTracking, SqliteStore

async def one(store, i):
    item = NewTracking(f"trk_{i}", "default", "function_job", f"J-{i}", 1e10, float(i), 0.0)
    [(tracking, created)] = await store.create_trackings([item])
    print("created", tracking.tracking_id, flush=True)
    event = NewEvent(f"evt_{i}", tracking.tracking_id, "t", 1.0, b"{}", ["sink:a"])
    if (await store.finish([Finish(tracking.tracking_id, "failed", 1.0, None, event)]))[0]:
        print("finished", tracking.tracking_id, flush=True)

async def main(path):
    store = SqliteStore(path)
    await store.open()
    print("ready", flush=True)
    for start in range(0, 200_000, 50):
        await asyncio.gather(*(one(store, i) for i in range(start, start + 50)))

asyncio.run(main(sys.argv[1]))
"""


async def test_sigkill_loses_nothing_acknowledged(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHILD, str(path), stdout=asyncio.subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(60):
            while sum(line.startswith("finished") for line in lines) < 300:
                raw = await proc.stdout.readline()
                assert raw, "the child exited early"
                lines.append(raw.decode().strip())
        with pytest.raises(StoreLocked):  # held by the other process
            await SqliteStore(path).open()
    finally:
        proc.send_signal(signal.SIGKILL)
        lines.extend(line.decode().strip() for line in (await proc.stdout.read()).splitlines())
        await proc.wait()

    created = {line.split()[1] for line in lines if line.startswith("created")}
    finished = {line.split()[1] for line in lines if line.startswith("finished")}
    store = SqliteStore(path)
    await store.open()
    for tracking_id in created:
        assert await store.get_tracking(tracking_id) is not None, tracking_id
    for tracking_id in finished:
        got = await store.get_tracking(tracking_id)
        assert got is not None and got.state == "terminal", tracking_id
    events = await store.events_after(0, 1_000_000)
    by_tracking = {e.tracking_id for e in events}
    assert finished <= by_tracking
    assert len(by_tracking) == len(events)  # never two terminal events for one tracking
    pending = await store.outbox_pending_counts()
    assert pending.get("sink:a", 0) == len(events)
    await store.close()
