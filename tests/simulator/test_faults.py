"""Fault injection per route and id: each kind, windows, hit limits, seeded ratios."""

from __future__ import annotations

import asyncio
import json
import time
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp
import pytest

from orchestrator.simulator import start_simulator
from tests.simulator.conftest import JOBS, NET, call, enqueue


async def faults(client: aiohttp.ClientSession, *rules: dict[str, Any]) -> None:
    status, body = await call(client, "PUT", "/_sim/faults", {"rules": list(rules)})
    assert status == 200, body


async def test_http_5xx_and_not_found(client: aiohttp.ClientSession) -> None:
    job = await enqueue(client)
    path = f"{JOBS}/{job['JobId']}"
    await faults(client, {"route": "job_status", "fault": "http_5xx", "status": 502})
    assert (await call(client, "GET", path))[0] == 502
    await faults(client, {"route": "job_status", "fault": "not_found"})
    status, body = await call(client, "GET", path)
    assert status == 404 and body["status"] == 404
    await faults(client)
    assert (await call(client, "GET", path))[0] == 200


async def test_rate_limited_and_unavailable_carry_retry_after(
    client: aiohttp.ClientSession,
) -> None:
    job = await enqueue(client)
    path = f"{JOBS}/{job['JobId']}"
    await faults(client, {"route": "*", "fault": "rate_limited", "retry_after_s": 3})
    async with client.get(path) as response:
        assert response.status == 429 and response.headers["Retry-After"] == "3"
    await faults(
        client,
        {"fault": "unavailable", "retry_after_s": 30, "retry_after_format": "http_date"},
    )
    async with client.get(path) as response:
        assert response.status == 503
        when = parsedate_to_datetime(response.headers["Retry-After"]).timestamp()
        assert 20 < when - time.time() <= 31


async def test_reset_closes_without_an_answer(client: aiohttp.ClientSession) -> None:
    job = await enqueue(client)
    await faults(client, {"route": "job_status", "id": job["JobId"], "fault": "reset"})
    with pytest.raises(aiohttp.ClientError):
        await call(client, "GET", f"{JOBS}/{job['JobId']}")
    _status, log = await call(client, "GET", f"/_sim/requests?id={job['JobId']}")
    assert log["requests"][-1]["status"] == 0  # logged as "no answer"


async def test_malformed_body(client: aiohttp.ClientSession) -> None:
    job = await enqueue(client)
    await faults(client, {"route": "job_status", "fault": "malformed"})
    async with client.get(f"{JOBS}/{job['JobId']}") as response:
        assert response.status == 200
        text = await response.text()
    with pytest.raises(ValueError):
        json.loads(text)


async def test_latency(client: aiohttp.ClientSession) -> None:
    job = await enqueue(client)
    await faults(client, {"route": "job_status", "fault": "latency", "latency_s": 0.3})
    started = time.monotonic()
    assert (await call(client, "GET", f"{JOBS}/{job['JobId']}"))[0] == 200
    assert time.monotonic() - started >= 0.29


async def test_rules_target_routes_ids_windows_and_hit_limits(
    client: aiohttp.ClientSession,
) -> None:
    a, b = await enqueue(client), await enqueue(client)
    await faults(
        client,
        {"route": "job_status", "id": a["JobId"], "fault": "http_5xx", "max_hits": 2},
        {"route": "build_submit", "fault": "http_5xx", "status": 503, "start_s": 0.3},
    )
    codes = [(await call(client, "GET", f"{JOBS}/{a['JobId']}"))[0] for _ in range(3)]
    assert codes == [500, 500, 200]
    assert (await call(client, "GET", f"{JOBS}/{b['JobId']}"))[0] == 200
    assert (await call(client, "POST", NET, {}))[0] == 200  # before the window opens
    await asyncio.sleep(0.35)
    assert (await call(client, "POST", NET, {}))[0] == 503
    _status, body = await call(client, "GET", "/_sim/faults")
    assert body["rules"][0]["hits"] == 2
    # Control routes are never faulted.
    await faults(client, {"route": "*", "fault": "http_5xx"})
    assert (await call(client, "GET", "/_sim/stats"))[0] == 200


async def test_bad_rules_are_400(client: aiohttp.ClientSession) -> None:
    for body in (
        {},
        {"rules": {}},
        {"rules": [{"fault": "explode"}]},
        {"rules": [{"fault": "http_5xx", "route": "everything"}]},
        {"rules": [{"fault": "http_5xx", "ratio": 2}]},
        {"rules": [{"fault": "latency", "latency_s": "slow"}]},
        {"rules": [{"fault": "http_5xx", "colour": "red"}]},
        {"rules": [{"fault": "http_5xx", "max_hits": -1}]},
    ):
        status, answer = await call(client, "PUT", "/_sim/faults", body)
        assert status == 400, (body, answer)


async def test_ratio_decisions_repeat_with_the_seed() -> None:
    async def pattern() -> list[int]:
        async with (
            await start_simulator(profile="fast", seed=42) as sim,
            aiohttp.ClientSession(base_url=sim.url) as client,
        ):
            job = await enqueue(client)
            await faults(client, {"route": "job_status", "fault": "http_5xx", "ratio": 0.5})
            return [(await call(client, "GET", f"{JOBS}/{job['JobId']}"))[0] for _ in range(30)]

    first, second = await pattern(), await pattern()
    assert first == second and {200, 500} == set(first)


async def test_chaos_profile_installs_rules() -> None:
    async with (
        await start_simulator(profile="chaos", seed=1) as sim,
        aiohttp.ClientSession(base_url=sim.url) as client,
    ):
        _, body = await call(client, "GET", "/_sim/faults")
    kinds = {r["fault"] for r in body["rules"]}
    assert kinds == {
        "latency",
        "http_5xx",
        "rate_limited",
        "unavailable",
        "reset",
        "malformed",
        "not_found",
    }
