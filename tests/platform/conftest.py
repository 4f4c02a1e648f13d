"""The core harness (real simulator, in-process service) plus platform helpers."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.core.conftest import (  # noqa: F401 - fixtures, found by name
    FAST_POLLING,
    Api,
    StartService,
    api,
    make_settings,
    sim_url,
    start_service,
)


async def set_jobs(svc: Api, **job: Any) -> None:
    """Override the simulator's job behaviour for every job created afterwards."""
    status, body = await svc.sim("PUT", "/_sim/profile", {"job": job})
    assert status == 200, body


async def events_of(svc: Api, tracking_id: str) -> list[dict[str, Any]]:
    status, body = await svc.call("GET", "/v1/events?after=0&limit=1000")
    assert status == 200, body
    return [e for e in body["events"] if e["subject"] == tracking_id]


async def wait_for(
    svc: Api, tracking_id: str, predicate: Any, timeout: float = 30.0
) -> list[dict[str, Any]]:
    """The tracking's events once ``predicate(events)`` holds."""
    async with asyncio.timeout(timeout):
        while True:
            events = await events_of(svc, tracking_id)
            if predicate(events):
                return events
            await asyncio.sleep(0.1)


def occurrences(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e["data"]["occurrence"]
        for e in events
        if e["type"] == "com.moltaro.orchestrator.tracking.occurrence"
    ]
