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


async def prune_once(store: Store, before: float, stop: asyncio.Event | None = None) -> int:
    """Delete everything prunable older than ``before``; returns trackings and
    operational events deleted."""
    total = 0
    while stop is None or not stop.is_set():
        deleted = await store.prune(before, PRUNE_BATCH)
        total += deleted
        if deleted < PRUNE_BATCH:
            break
        await asyncio.sleep(0)
    return total


async def run_pruner(store: Store, events: EventsConfig, clock: Clock, stop: asyncio.Event) -> None:
    """Prune every ``events.prune_interval_s`` until ``stop`` is set."""
    while not stop.is_set():
        try:
            deleted = await prune_once(store, clock.now() - events.retention_s, stop)
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
