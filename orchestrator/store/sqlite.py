"""The SQLite store: WAL, numbered migrations, one group-commit writer, a read-only reader.

SQLite is reached one way, through aiosqlite. Writes go through
``GroupCommitWriter`` (one transaction per batch of waiting operations) on the
writer's connection; reads use their own read-only connection, which WAL lets
run beside the writer, so a read never queues behind a commit. An exclusive
advisory lock on ``<path>.lock`` keeps a second process off the file.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import sqlite3
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, TypeVarTuple

import aiosqlite

from orchestrator.errors import StoreError, StoreLocked, StoreNotWritable, StoreUnavailable
from orchestrator.store import codec, queries
from orchestrator.store import sqlite_groups as groups
from orchestrator.store import sqlite_writes as ops
from orchestrator.store.base import (
    Delivery,
    Finish,
    NewEvent,
    NewTracking,
    PollUpdate,
    Store,
    Tracking,
    WorkClassMerge,
    WorkClassSummary,
)
from orchestrator.store.group_commit import GroupCommitWriter, is_unavailable
from orchestrator.store.group_queries import SqlGroupReads
from orchestrator.store.groups import Group, GroupEventFactory, SealGroup
from orchestrator.store.schema import migrate_sqlite
from orchestrator.store.sqlite_scan import active_chunks as _scan_active

_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
CACHE_KIB = 32_768
MIN_SQLITE = (3, 35, 0)
BUSY_TIMEOUT_MS = 5000
# A burst (a big intake, writes while the resume's long read holds checkpoints
# back) grows the WAL file; SQLite reuses it but never shrinks it on its own.
# Past this size it is cut back whenever the log restarts from its beginning.
WAL_LIMIT_BYTES = 64 << 20
T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class SqliteStore(codec.SqlShared, SqlGroupReads, Store):
    shares_work = False
    _q = queries
    _NO_LIMIT = -1
    _sql = staticmethod(str)

    def __init__(
        self,
        path: str | Path,
        *,
        commit_interval_s: float = 0.005,
        max_batch: int = 2000,
        synchronous: str = "FULL",
    ) -> None:
        if synchronous.upper() not in _SYNCHRONOUS:
            raise ValueError(f"synchronous must be one of {', '.join(_SYNCHRONOUS)}")
        self.path = Path(path)
        self._synchronous = synchronous.upper()
        self._commit_interval_s = commit_interval_s
        self._max_batch = max_batch
        self._writer: GroupCommitWriter | None = None
        self._reader: aiosqlite.Connection | None = None
        self._lock_fd: int | None = None

    # -- lifecycle ----------------------------------------------------------------------

    async def open(self) -> None:
        if self._lock_fd is not None:
            raise StoreError(f"store {self.path} is already open")
        if sqlite3.sqlite_version_info < MIN_SQLITE:
            # UPDATE ... FROM (3.33) and INSERT ... RETURNING (3.35) carry the bulk writes.
            raise StoreError(
                f"SQLite {sqlite3.sqlite_version} is too old: the store needs"
                f" {'.'.join(map(str, MIN_SQLITE))} or newer"
            )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock_fd = _lock(self.path)
        except OSError as exc:
            raise _not_writable(self.path, exc) from None
        try:
            # Before aiosqlite: its worker thread outlives a failed connect and
            # can report into a loop that a failed start-up has already closed.
            await asyncio.to_thread(_probe_writable, self.path)
            self._writer = GroupCommitWriter(
                self._connect_writer,
                commit_interval_s=self._commit_interval_s,
                max_batch=self._max_batch,
                name=f"store-writer:{self.path.name}",
            )
            await self._writer.start(migrate_sqlite)
            self._reader = await aiosqlite.connect(
                f"{self.path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None
            )
            await self._reader.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        except BaseException as exc:
            await self.close()
            if isinstance(exc, sqlite3.Error):
                if _cannot_write(exc):
                    raise _not_writable(self.path, exc) from None
                raise _store_error(exc, f"cannot open store {self.path}") from exc
            raise

    async def close(self) -> None:
        # The reader first: the last connection to close checkpoints the WAL and
        # deletes its file, and a read-only one cannot.
        if self._reader is not None:
            await self._reader.close()
            self._reader = None
        if self._writer is not None:
            await self._writer.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def stats(self) -> dict[str, int]:
        """Committed transactions and the operations they carried (group commit at work)."""
        return self._writer.stats() if self._writer else {"transactions": 0, "operations": 0}

    @property
    def writer_failure(self) -> BaseException | None:
        """Why the writer task died, if it did (every write then raises StoreUnavailable)."""
        return self._writer.failure if self._writer else None

    async def _submit(
        self, operation: Callable[[sqlite3.Connection, *Ts], T], *args: *Ts, weight: int = 1
    ) -> T:
        """``operation(conn, *args)`` in the writer's next group commit."""
        if self._writer is None:
            raise StoreUnavailable(f"store {self.path} is not open")
        return await self._writer.submit(lambda conn: operation(conn, *args), weight)

    async def _connect_writer(self) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(self.path, isolation_level=None)
        try:
            await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            mode = next(iter(await conn.execute_fetchall("PRAGMA journal_mode = WAL")))[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"store {self.path}: cannot use WAL journal mode (got {mode})")
            await conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            await conn.execute("PRAGMA foreign_keys = ON")
            await conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
            # SQLite's default page cache (2 MiB) holds the indexes of a few tens of
            # thousands of trackings; 32 MiB keeps those of 100,000 in memory for the
            # inserts of random ids. Pages are taken only as they are used.
            await conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        except BaseException:
            await conn.close()
            raise
        return conn

    # -- writes (reads and one-statement writes: codec.SqlShared) ----------------------

    async def _execute(self, sql: str, *params: object) -> int:
        return await self._submit(ops.execute, sql, params)

    async def check_writable(self) -> bool:
        try:
            await self._execute(queries.PROBE_WRITE, time.time())
        except StoreError:
            return False
        return True

    async def create_trackings(
        self, items: Sequence[NewTracking], seal: SealGroup | None = None
    ) -> list[tuple[Tracking, bool]]:
        if not items and seal is None:
            return []
        return await self._submit(groups.create, list(items), seal, weight=max(1, len(items)))

    async def seal_group(self, seal: SealGroup) -> Group | None:
        return await self._submit(groups.seal, seal, False)

    async def expire_groups(self, now: float, event: GroupEventFactory) -> list[Group]:
        return await self._submit(groups.expire, now, event)

    async def record_polls(self, updates: Sequence[PollUpdate]) -> None:
        if updates:
            await self._submit(ops.record_polls, list(updates), weight=len(updates))

    async def finish(self, items: Sequence[Finish]) -> list[bool]:
        if not items:
            return []
        return await self._submit(ops.finish, list(items), groups.grouped, weight=len(items))

    async def claim_deliveries(
        self, destination: str, now: float, limit: int, lease_s: float
    ) -> list[Delivery]:
        claim = ops.claim_deliveries
        return await self._submit(claim, destination, now, limit, lease_s, weight=max(1, limit))

    async def _change_sink(self, sql: str, event: NewEvent, *params: object) -> bool:
        return await self._submit(ops.change_sink, sql, params, event)

    async def merge_work_classes(
        self, merges: Sequence[WorkClassMerge], forget: Sequence[tuple[str, str, str]] = ()
    ) -> list[WorkClassSummary]:
        if not merges and not forget:
            return []
        merge = ops.merge_work_classes
        return await self._submit(
            merge, list(merges), list(forget), weight=len(merges) + len(forget)
        )

    async def prune(self, before: float, batch: int) -> int:
        return await self._submit(ops.prune, before, batch, weight=max(1, batch))

    def active_chunks(self, size: int) -> AsyncGenerator[list[Tracking], None]:
        if self._reader is None:
            raise StoreUnavailable("store is closed")
        return _scan_active(self.path, size, BUSY_TIMEOUT_MS / 1000)

    async def _fetch(self, sql: str, *params: Any) -> list[Any]:
        if self._reader is None:
            raise StoreUnavailable("store is closed")
        try:
            return list(await self._reader.execute_fetchall(sql, params))
        except sqlite3.Error as exc:
            raise _store_error(exc, "store read failed") from exc


def _lock(path: Path) -> int:
    lock_path = path.with_name(path.name + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreLocked(
            f"store file {path} is in use by another process (lock held on {lock_path})"
        ) from None
    return fd


def _probe_writable(path: Path) -> None:
    """Open the file for writing and take its write lock once (raises sqlite3.Error)."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
    finally:
        conn.close()


def _cannot_write(exc: sqlite3.Error) -> bool:
    """A file SQLite cannot open or write: read-only file or directory, no permission
    to create the -wal/-shm files."""
    code = getattr(exc, "sqlite_errorcode", None) or 0
    return code & 0xFF in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN)


def _not_writable(path: Path, exc: OSError | sqlite3.Error) -> StoreNotWritable:
    """One line that names the path, who the process runs as, and the fixes."""
    if isinstance(exc, OSError):
        where, why = exc.filename or path, exc.strerror or str(exc)
    else:
        where, why = path, str(exc)
    uid, gid = os.getuid(), os.getgid()
    return StoreNotWritable(
        f"store.path: cannot write {where} ({why}) as uid {uid} gid {gid}: make"
        f" {path.parent} writable by that user (a container volume: chown {uid}:{gid} it,"
        f" or Kubernetes securityContext.fsGroup: {gid}) or point store.path"
        " (ORCH_STORE__PATH) at a writable directory"
    )


def _store_error(exc: sqlite3.Error, what: str) -> StoreError:
    kind = StoreUnavailable if is_unavailable(exc) else StoreError
    return kind(f"{what}: {exc}")
