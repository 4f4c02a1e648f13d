"""A wake-up signal for readers of the event log (SSE streams, delivery workers)."""

from __future__ import annotations

import asyncio

from orchestrator.aio import wait_event


class EventBus:
    """Publishers call ``publish()`` after committing events; waiters re-read the store.

    It carries no data on purpose: the store is the only source of events, so a
    missed wake-up costs at most one ``timeout`` and never an event.
    """

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def publish(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()

    def waiter(self) -> asyncio.Event:
        """The event the next ``publish()`` sets.

        Take it *before* reading the store and wait on it afterwards: a publish
        that lands during the read is then never missed.
        """
        return self._event

    async def wait(self, wait_s: float) -> bool:
        """True when woken by a publish, False after wait_s."""
        return await wait_event(self._event, wait_s)
