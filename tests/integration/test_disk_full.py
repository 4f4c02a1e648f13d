"""A real full disk: the SQLite store on a 512 KiB tmpfs, filled to the last block.

Needs permission to mount (root, as in CI, where not being able to is a failure).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.errors import StoreUnavailable
from orchestrator.store import NewTracking, SqliteStore, TrackingQuery
from tests.smallfs import fill as fill_up
from tests.smallfs import small_tmpfs


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "fs", "512k") as mount_point:
        yield mount_point


def fill(directory: Path) -> Path:
    return fill_up(directory, 4 * 1024 * 1024)


def batch(prefix: str, count: int) -> list[NewTracking]:
    return [
        NewTracking(
            tracking_id=f"{prefix}_{i}",
            workspace="default",
            kind="function_job",
            remote_id=f"{prefix}-{i}",
            deadline_at=10_000.0,
            created_at=1_000.0 + i,
            next_poll_at=1_001.0,
            labels={"team": "billing", "note": "x" * 100},
        )
        for i in range(count)
    ]


async def test_full_disk_refuses_writes_whole_and_recovers(small_fs: Path) -> None:
    store = SqliteStore(small_fs / "store.db", commit_interval_s=0.001)
    await store.open()
    try:
        await store.create_trackings(batch("before", 20))
        filler = fill(small_fs)

        assert not await store.check_writable()
        doomed = batch("doomed", 200)
        with pytest.raises(StoreUnavailable, match="full"):
            await store.create_trackings(doomed)
        # Reads still answer, and nothing of the refused batch is visible.
        assert len(await store.load_active()) == 20
        for item in doomed[::20]:
            assert await store.get_tracking(item.tracking_id) is None
        items, _ = await store.list_trackings(TrackingQuery(limit=1000))
        assert {t.tracking_id for t in items} == {f"before_{i}" for i in range(20)}

        filler.unlink()  # space returns: the same writer takes writes again
        assert await store.check_writable()
        created = await store.create_trackings(doomed)
        assert all(is_new for _, is_new in created)
        assert len(await store.load_active()) == 220
    finally:
        await store.close()

    reopened = SqliteStore(small_fs / "store.db")
    await reopened.open()
    try:
        assert len(await reopened.load_active()) == 220
    finally:
        await reopened.close()
