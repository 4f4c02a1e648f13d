"""Group commit: one writer connection, many operations per transaction.

Every write of the SQLite store is a plain function of a ``sqlite3.Connection``
submitted here. One named task drains the queue, runs as many operations as are
waiting (up to ``max_batch`` rows, waiting at most ``commit_interval_s`` for
more) in ONE transaction on the aiosqlite connection's thread, commits, and only then resolves
each caller's future. Each operation runs under its own SAVEPOINT, so a
constraint error fails only its caller; an error that means the database cannot
be written (full disk, I/O error, read-only file) rolls back the whole
transaction and fails every caller in it with StoreUnavailable, and the writer
carries on so that writes succeed again once the cause is gone.

The whole batch runs in one call on that thread: one thread hop per
transaction instead of one per statement (a hop costs about 0.2 ms of CPU on
these machines), which is what lets tens of thousands of poll updates a second
fit in a few dozen transactions.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import aiosqlite

from orchestrator.errors import StoreError, StoreUnavailable

log = logging.getLogger("orchestrator.store")

T = TypeVar("T")
Operation = Callable[[sqlite3.Connection], Any]

# Primary result codes that mean "this database cannot take writes now", not "this operation
# is wrong": they fail the whole transaction rather than one savepoint.
_UNAVAILABLE = frozenset(
    {
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_CORRUPT,
        sqlite3.SQLITE_NOTADB,
        sqlite3.SQLITE_PROTOCOL,
    }
)


async def on_thread(conn: aiosqlite.Connection, fn: Callable[..., T], *args: Any) -> T:
    """``fn(sqlite3_connection, *args)`` on the connection's own thread, in one hop.

    aiosqlite's public calls take one hop per statement; this is the path its
    own methods use (``_execute``), with the pin in pyproject.toml guarding it.
    """
    result: T = await conn._execute(fn, conn._conn, *args)  # type: ignore[no-untyped-call]
    return result


def is_unavailable(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return isinstance(exc, sqlite3.OperationalError)
    return (code & 0xFF) in _UNAVAILABLE


@dataclass(slots=True)
class _Pending:
    operation: Operation | None  # None asks the writer to stop once everything before it ran
    weight: int
    future: asyncio.Future[Any]


class GroupCommitWriter:
    def __init__(
        self,
        connect: Callable[[], Awaitable[aiosqlite.Connection]],
        *,
        commit_interval_s: float,
        max_batch: int,
        name: str,
    ) -> None:
        self._connect = connect
        self._interval = commit_interval_s
        self._max_batch = max(1, max_batch)
        self._name = name
        self._queue: deque[_Pending] = deque()
        self._wakeup = asyncio.Event()
        self._conn: aiosqlite.Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._in_flight: list[_Pending] = []
        self._closing = False
        self.failure: BaseException | None = None
        self._transactions = 0
        self._operations = 0
        self._failed_transactions = 0

    async def start(self, setup: Operation) -> None:
        """Connect, run ``setup`` (migrations) on the connection's thread, start the task."""
        self._conn = await self._connect()
        await on_thread(self._conn, setup)
        self._task = asyncio.create_task(self._run(), name=self._name)

    def stats(self) -> dict[str, int]:
        return {
            "transactions": self._transactions,
            "operations": self._operations,
            "failed_transactions": self._failed_transactions,
        }

    async def submit(self, operation: Callable[[sqlite3.Connection], T], weight: int = 1) -> T:
        """Run ``operation`` in the next group commit; return its result once committed."""
        if self.failure is not None:
            raise StoreUnavailable(f"store writer stopped: {self.failure!r}")
        if self._closing or self._task is None:
            raise StoreUnavailable("store is closed")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(operation, max(1, weight), future))
        self._wakeup.set()
        # A cancelled caller cancels only its wait: the operation stays queued and runs, so a
        # write that may already be committing is never half-abandoned.
        return await future

    async def close(self) -> None:
        """Run everything already submitted, then close the connection and the thread."""
        if self._closing:
            return
        self._closing = True
        loop = asyncio.get_running_loop()
        if self._task is not None and not self._task.done():
            self._queue.append(_Pending(None, 1, loop.create_future()))
            self._wakeup.set()
            await asyncio.wait([self._task])
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    async def _run(self) -> None:
        try:
            await self._loop()
        except BaseException as exc:
            # Never silent: recorded (every later submit raises StoreUnavailable), logged,
            # and every caller still waiting is failed rather than left hanging.
            self.failure = exc
            log.error("store writer %s died: %r", self._name, exc, exc_info=exc)
            error = StoreUnavailable(f"store writer stopped: {exc!r}")
            for pending in self._in_flight:
                _settle(pending.future, error=error)
            while self._queue:
                _settle(self._queue.popleft().future, error=error)
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def _loop(self) -> None:
        stopping = False
        while not stopping:
            if not self._queue:
                self._wakeup.clear()
                await self._wakeup.wait()
            batch: list[_Pending] = []
            weight = self._drain(batch, 0)
            if self._interval > 0 and weight < self._max_batch and batch[-1].operation:
                await asyncio.sleep(self._interval)
                weight = self._drain(batch, weight)
            stopping = any(p.operation is None for p in batch)
            self._in_flight = [p for p in batch if p.operation is not None]
            if not self._in_flight:
                continue
            operations = [p.operation for p in self._in_flight if p.operation is not None]
            try:
                assert self._conn is not None
                outcomes = await on_thread(self._conn, self._transaction, operations)
            except StoreUnavailable as exc:
                self._failed_transactions += 1
                log.warning("store write of %d operations failed: %s", len(operations), exc)
                for pending in self._in_flight:
                    _settle(pending.future, error=StoreUnavailable(str(exc)))
            else:
                self._transactions += 1
                self._operations += len(operations)
                for pending, (ok, value) in zip(self._in_flight, outcomes, strict=True):
                    _settle(pending.future, value=value, error=None if ok else value)
            self._in_flight = []

    def _drain(self, batch: list[_Pending], weight: int) -> int:
        while self._queue and weight < self._max_batch and (not batch or batch[-1].operation):
            pending = self._queue.popleft()
            batch.append(pending)
            weight += pending.weight
        return weight

    def _transaction(
        self, conn: sqlite3.Connection, operations: list[Operation]
    ) -> list[tuple[bool, Any]]:
        """On the connection's thread: all operations in one transaction.

        Operations almost never fail one by one, so the batch first runs without
        savepoints (half the statements); only when one does fail is the batch rolled
        back and run again with a savepoint around each operation, which fails that
        operation alone. Operations are plain functions of the database, so running one
        again after a rollback gives the same answer.
        """
        try:
            return self._attempt(conn, operations, isolated=False)
        except _Isolate:
            return self._attempt(conn, operations, isolated=True)

    def _attempt(
        self, conn: sqlite3.Connection, operations: list[Operation], *, isolated: bool
    ) -> list[tuple[bool, Any]]:
        outcomes: list[tuple[bool, Any]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            for operation in operations:
                if isolated:
                    conn.execute("SAVEPOINT op")
                try:
                    value = operation(conn)
                except Exception as exc:
                    fatal = isinstance(exc, sqlite3.Error) and is_unavailable(exc)
                    if fatal or not conn.in_transaction:
                        raise
                    if not isolated:
                        raise _Isolate from exc
                    conn.execute("ROLLBACK TO op")
                    conn.execute("RELEASE op")
                    outcomes.append((False, _operation_error(exc)))
                else:
                    if isolated:
                        conn.execute("RELEASE op")
                    outcomes.append((True, value))
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    log.warning("rollback after a failed store write failed too", exc_info=True)
            if isinstance(exc, sqlite3.Error):
                raise StoreUnavailable(f"store cannot write: {exc}") from exc
            raise
        return outcomes


class _Isolate(Exception):
    """An operation failed in a batch run without savepoints: run it again with them."""


def _operation_error(exc: Exception) -> Exception:
    if isinstance(exc, sqlite3.Error):
        error = StoreError(f"store operation failed: {exc}")
        error.__cause__ = exc
        return error
    return exc


def _settle(
    future: asyncio.Future[Any], *, value: Any = None, error: BaseException | None = None
) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
