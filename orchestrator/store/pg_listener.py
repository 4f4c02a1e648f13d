"""LISTEN on the shared store: other replicas' news reaches an idle replica at once.

One connection of its own (a pooled one would be handed to other work), on
channel ``orchestrator``: ``work`` when leases were released, ``events`` when
events were committed, ``sinks`` when a sink was disabled or enabled.
Notifications only wake; claims and reads still poll on their own intervals,
so a lost listener costs latency, never work. A lost connection is retried
with a growing delay; ``up`` reports the state (the
``orchestrator_store_listener_up`` gauge).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import asyncpg  # type: ignore[import-untyped]

from orchestrator.aio import wait_event
from orchestrator.store import pg_queries as q
from orchestrator.store.pg_pool import is_store_failure

log = logging.getLogger("orchestrator.store")

CHECK_S = 5.0  # a connection that stopped answering is noticed this fast
MAX_BACKOFF_S = 10.0


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
