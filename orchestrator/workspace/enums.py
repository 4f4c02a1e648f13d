"""Each workspace's enums, read from its installed OpenAPI document and kept fresh."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

import anyio

from orchestrator.aio import wait_event
from orchestrator.interpret.filters import ROUTES
from orchestrator.metrics import Metrics
from orchestrator.vocabulary import KINDS
from orchestrator.workspace.client import WorkspaceClient

log = logging.getLogger("orchestrator.workspace")

# While a workspace is on the documented fallback, look again at least this often.
FALLBACK_RETRY_S = 30.0


async def refresh_enums(clients: Mapping[str, WorkspaceClient], metrics: Metrics) -> None:
    for name, client in clients.items():
        # Digests are keyed by the enums: bodies read under new ones are judged afresh.
        ok = await client.load_enums()
        for kind, spec in KINDS.items():
            if spec.enums is not None:  # a kind found by filter reads the function job's
                fallback = 1 if client.enums[spec.enums].source == "fallback" else 0
                metrics.enum_source.labels(workspace=name, kind=kind).set(fallback)
        for route in ROUTES:
            on_fallback = 1 if route in client.filters.fallback else 0
            metrics.filter_names_fallback.labels(workspace=name, route=route).set(on_fallback)
        if ok:
            log.info("enums read from OpenAPI", extra={"fields": {"workspace": name}})


async def keep_enums_fresh(
    clients: Mapping[str, WorkspaceClient], metrics: Metrics, every_s: float, stop: asyncio.Event
) -> None:
    async with anyio.create_task_group() as tg:

        async def end_on_stop() -> None:
            # A refresh waiting at a gate (Retry-After, a replica's lapsed leases)
            # must not hold the engine's stop: it is cancelled, nothing is lost.
            await stop.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(end_on_stop)
        while not stop.is_set():
            fallback = any(
                m.source == "fallback" for c in clients.values() for m in c.enums.values()
            )
            wait = min(FALLBACK_RETRY_S, every_s) if fallback else every_s
            if not await wait_event(stop, wait):
                await refresh_enums(clients, metrics)
