"""A fresh simulator per test, served on 127.0.0.1 with a free port, and an HTTP client for it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from orchestrator.simulator import RunningSimulator, start_simulator

JOBS = "/api/workspace/functions/jobs"
NET = "/api/workspace/admin/net-operation-project/builds"
UI = "/api/workspace/admin/ui-project/builds"
OPS = "/api/workspace/admin/function-operations"


@pytest.fixture(params=[False, True], ids=["aiohttp", "front"])
async def sim(request: pytest.FixtureRequest) -> AsyncIterator[RunningSimulator]:
    # Every test of the simulator's behaviour runs twice: once on aiohttp
    # alone, once behind the status-read front the benchmark uses, which must
    # not change anything a caller can see.
    async with await start_simulator(profile="fast", seed=7, front=request.param) as running:
        yield running


@pytest.fixture
async def client(sim: RunningSimulator) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=sim.url) as session:
        yield session


async def call(
    client: aiohttp.ClientSession, method: str, path: str, body: Any = None
) -> tuple[int, Any]:
    kwargs: dict[str, Any] = {} if body is None else {"json": body}
    async with client.request(method, path, **kwargs) as response:
        text = await response.text()
        try:
            return response.status, json.loads(text) if text else None
        except ValueError:
            return response.status, text


async def set_job(client: aiohttp.ClientSession, **behaviour: Any) -> None:
    status, body = await call(client, "PUT", "/_sim/profile", {"job": behaviour})
    assert status == 200, body


async def set_build(client: aiohttp.ClientSession, **behaviour: Any) -> None:
    status, body = await call(client, "PUT", "/_sim/profile", {"build": behaviour})
    assert status == 200, body


async def enqueue(
    client: aiohttp.ClientSession, key: str = "billing.sync-invoices", **body: Any
) -> dict[str, Any]:
    status, answer = await call(client, "POST", f"/api/workspace/functions/{key}/enqueue", body)
    assert status == 200, answer
    assert answer["Succeeded"] is True
    model: dict[str, Any] = answer["Data"]
    return model


async def poll_until(
    client: aiohttp.ClientSession,
    path: str,
    done: Callable[[dict[str, Any]], bool],
    timeout: float = 10.0,
    every: float = 0.05,
) -> list[dict[str, Any]]:
    """Every body seen until ``done`` holds (bounded by ``timeout``)."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = await call(client, "GET", path)
        assert status == 200, body
        seen.append(body)
        if done(body):
            return seen
        await asyncio.sleep(every)
    raise AssertionError(f"{path} never reached the expected state; last: {seen[-1:]}")
