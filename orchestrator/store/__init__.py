"""Durable state: trackings, the event log and the delivery outbox, behind ``Store``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    ReplaySpan,
    Store,
    Tracking,
    TrackingQuery,
    WorkClassMerge,
    WorkClassSummary,
)
from orchestrator.store.codec import MAX_PAGE, InvalidCursor
from orchestrator.store.memory import MemoryStore
from orchestrator.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from orchestrator.store.postgres import PostgresStore

__all__ = [
    "MAX_PAGE",
    "Claimed",
    "Delivery",
    "DeliveryState",
    "DisabledSink",
    "EventRecord",
    "Finish",
    "InvalidCursor",
    "MemoryStore",
    "NewEvent",
    "NewTracking",
    "PollUpdate",
    "PostgresStore",
    "ReplaySpan",
    "SqliteStore",
    "Store",
    "Tracking",
    "TrackingQuery",
    "WorkClassMerge",
    "WorkClassSummary",
    "open_store",
]


def __getattr__(name: str) -> Any:
    # asyncpg is imported by those who use a PostgreSQL store only: a SQLite service
    # starts (and answers /healthz) without it.
    if name == "PostgresStore":
        from orchestrator.store.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


async def open_store(
    path: str | Path,
    *,
    commit_interval_s: float = 0.005,
    max_batch: int = 2000,
    synchronous: str = "FULL",
) -> Store:
    """An opened store: SQLite at ``path``, or a MemoryStore when ``path`` is ``":memory:"``."""
    store: Store
    if str(path) == ":memory:":
        store = MemoryStore()
    else:
        store = SqliteStore(
            path,
            commit_interval_s=commit_interval_s,
            max_batch=max_batch,
            synchronous=synchronous,
        )
    await store.open()
    return store
