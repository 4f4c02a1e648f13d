"""The PostgreSQL store's connections: the pool with its error mapping, and the
listener's connection of its own.

asyncpg keeps a cache of prepared statements on each connection: every
statement of ``pg_queries`` is constant text, so it is parsed and planned once
per connection of the pool and executed from the cache after that.

The listener (LISTEN on channel ``orchestrator``) brings other replicas' news to
an idle replica at once: ``work`` when leases were released, ``events`` when
events were committed, ``sinks`` when a sink was disabled or enabled. It has its
own connection (a pooled one would be handed to other work). Notifications only
wake; claims and reads still poll on their own intervals, so a lost listener
costs latency, never work. A lost connection is retried with a growing delay;
``up`` reports the state (the ``orchestrator_store_listener_up`` gauge).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import urllib.parse
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg  # type: ignore[import-untyped]

from orchestrator.aio import wait_event
from orchestrator.errors import StoreError, StoreUnavailable
from orchestrator.store import pg_queries as q

log = logging.getLogger("orchestrator.store")

CONNECT_TIMEOUT_S = 10.0
COMMAND_TIMEOUT_S = 30.0
CHECK_S = 5.0  # a listener connection that stopped answering is noticed this fast
MAX_BACKOFF_S = 10.0

# Errors that say the database cannot be reached or cannot take work now (a restart,
# a lost connection, too many clients), as opposed to an operation that is wrong.
_UNAVAILABLE: tuple[type[BaseException], ...] = (
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,  # e.g. a connection reset while the server went away
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.InsufficientResourcesError,
    asyncpg.OperatorInterventionError,
    asyncpg.ReadOnlySQLTransactionError,
    asyncpg.TransactionRollbackError,  # a deadlock or serialisation failure: try again
    OSError,
    TimeoutError,
)


async def _nothing_to_reset(conn: Any) -> None:
    """Our statements leave no session state on a pooled connection (no SET, LISTEN
    or session lock; the listener has a connection of its own), so a connection goes
    back to the pool without asyncpg's reset query: one round trip less per use,
    which on a slow link is most of a renewal's time."""


def redacted(dsn: str) -> str:
    """The DSN without any password, for messages and logs."""
    parts = urllib.parse.urlsplit(dsn)
    if parts.password is None:
        return dsn
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def store_error(exc: BaseException, what: str) -> StoreError:
    kind = StoreUnavailable if isinstance(exc, _UNAVAILABLE) else StoreError
    # The class and the server's message only: never the DSN or its password.
    return kind(f"{what}: {type(exc).__name__}: {exc}")


def is_store_failure(exc: BaseException) -> bool:
    return isinstance(exc, (*_UNAVAILABLE, asyncpg.PostgresError))


class Pool:
    def __init__(self, dsn: str, password: str | None, size: int, application: str) -> None:
        self.dsn = dsn
        self._password = password
        self._size = size
        self._application = application[:63]
        self._pool: Any = None

    def connect_kwargs(self) -> dict[str, Any]:
        return {
            "dsn": self.dsn,
            "password": self._password,
            "timeout": CONNECT_TIMEOUT_S,
            "command_timeout": COMMAND_TIMEOUT_S,
            "server_settings": {"application_name": self._application},
        }

    async def open(self) -> None:
        try:
            # Opened whole and kept: a connection opened under load costs several round
            # trips (TCP, start-up, authentication), seconds on a slow link, while the
            # renewals and claims that need one wait.
            self._pool = await asyncpg.create_pool(
                min_size=self._size, max_size=self._size, max_inactive_connection_lifetime=0,
                reset=_nothing_to_reset, **self.connect_kwargs(),
            )  # fmt: skip
        except Exception as exc:
            raise store_error(exc, f"cannot connect to {redacted(self.dsn)}") from None

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await pool.close()
            except Exception:
                pool.terminate()

    @property
    def is_open(self) -> bool:
        return self._pool is not None

    @contextlib.asynccontextmanager
    async def connection(self, what: str, *, transaction: bool) -> AsyncIterator[Any]:
        """A connection of the pool (in a transaction when asked); asyncpg's errors
        become StoreUnavailable (cannot reach or write) or StoreError (this operation)."""
        if self._pool is None:
            raise StoreUnavailable("store is closed")
        try:
            async with self._pool.acquire() as conn:
                if transaction:
                    async with conn.transaction():
                        yield conn
                else:
                    yield conn
        except StoreError:
            raise
        except Exception as exc:
            if not is_store_failure(exc):
                raise
            raise store_error(exc, what) from exc


class Listener:
    def __init__(
        self,
        connect_kwargs: dict[str, Any],
        on_message: Callable[[str], None],
        up: Callable[[bool], None],
    ) -> None:
        self._connect_kwargs = connect_kwargs
        self._on_message = on_message
        self._up = up

    async def run(self, stop: asyncio.Event) -> None:
        backoff = 0.2
        while not stop.is_set():
            try:
                await self._listen(stop)
                backoff = 0.2
            except Exception as exc:
                if not is_store_failure(exc):
                    raise
                log.warning(
                    "store listener lost; reconnecting",
                    extra={"fields": {"error": type(exc).__name__, "retry_s": backoff}},
                )
            finally:
                self._up(False)
            await wait_event(stop, backoff)
            backoff = min(MAX_BACKOFF_S, backoff * 2)

    async def _listen(self, stop: asyncio.Event) -> None:
        conn = await asyncpg.connect(**self._connect_kwargs)
        lost = asyncio.Event()
        try:
            conn.add_termination_listener(lambda _conn: lost.set())
            await conn.add_listener(q.CHANNEL, self._notified)
            self._up(True)
            # Whatever happened while no one listened: wake everything once.
            for payload in ("work", "events", "sinks"):
                self._on_message(payload)
            while not stop.is_set() and not lost.is_set():
                await wait_event(stop, CHECK_S)
                if not stop.is_set():
                    await conn.execute("SELECT 1", timeout=CHECK_S)
        finally:
            conn.terminate()
        if lost.is_set() and not stop.is_set():
            raise asyncpg.ConnectionDoesNotExistError("listener connection closed")

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self._on_message(payload)
