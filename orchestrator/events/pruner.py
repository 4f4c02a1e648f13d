"""Retention: terminal trackings and their settled events are deleted once old.

Deletes go in small batches with a yield between them, so the store's writer
and the polling loop are never held up for more than one short transaction.
"""

from __future__ import annotations

import asyncio
import logging

from orchestrator.aio import wait_event
from orchestrator.clock import Clock
from orchestrator.config import EventsConfig
from orchestrator.errors import StoreUnavailable
from orchestrator.store.base import Store

log = logging.getLogger(__name__)

PRUNE_BATCH = 500


async def run_pruner(store: Store, events: EventsConfig, clock: Clock, stop: asyncio.Event) -> None:
    """Every ``events.prune_interval_s`` until ``stop`` is set, delete everything
    prunable older than ``events.retention_s`` (trackings and operational events)."""
    while not stop.is_set():
        before = clock.now() - events.retention_s
        deleted = 0
        try:
            while not stop.is_set():
                batch = await store.prune(before, PRUNE_BATCH)
                deleted += batch
                if batch < PRUNE_BATCH:
                    break
                await asyncio.sleep(0)
        except StoreUnavailable as exc:
            log.warning("pruning skipped, store unavailable: %s", exc)
        else:
            if deleted:
                log.info(
                    "pruned %d terminal trackings and operational events older than %g s",
                    deleted,
                    events.retention_s,
                )
        await wait_event(stop, events.prune_interval_s)
