"""A workspace in trouble gets fewer requests, not more: seen in metrics and by the simulator."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from orchestrator.simulator import start_simulator
from tests.chaos.harness import (
    EXPECTED,
    Client,
    Secrets,
    metric_sum,
    script,
    set_faults,
    write_config,
)
from tests.serveproc import ServeProcess, free_port

MAX_DELAY_S = 1.0


@dataclass
class Rig:
    client: Client
    session: aiohttp.ClientSession
    sim_url: str
    serve: ServeProcess

    async def requests(self, rid: str) -> list[dict[str, Any]]:
        async with self.session.get(f"{self.sim_url}/_sim/requests?id={rid}") as resp:
            return [r for r in (await resp.json())["requests"] if r["route"] != "control"]


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    secrets = Secrets()
    async with await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=5) as sim:
        port = free_port()
        cfg = write_config(
            tmp_path,
            port=port,
            sim_url=sim.url,
            store_path=tmp_path / "orch.db",
            down_url=f"http://127.0.0.1:{free_port()}",
            max_delay_s=MAX_DELAY_S,
        )
        serve = ServeProcess(cfg, port, tmp_path / "serve.log", secrets.env())
        async with aiohttp.ClientSession() as session:
            try:
                await serve.start(session)
                yield Rig(Client(session, serve.url, secrets.api_token), session, sim.url, serve)
                assert serve.terminate() == 0, serve.tail()
            finally:
                serve.ensure_dead()


async def test_unreachable_workspace_is_polled_at_a_bounded_rate(rig: Rig) -> None:
    n = 5
    for i in range(n):
        status, body = await rig.client.post(
            "/v1/trackings",
            {"kind": "function_job", "remote_id": f"J-{i}", "workspace": "down", "timeout_s": 9},
        )
        assert status == 201, body
    await asyncio.sleep(3)  # past the back-off ramp (0.05 s doubling up to 1 s)
    before = metric_sum(await rig.client.metrics(), "orchestrator_polls_total", workspace="down")
    await asyncio.sleep(4)
    text = await rig.client.metrics()
    after = metric_sum(text, "orchestrator_polls_total", workspace="down")
    # At most one read per tracking per max_delay_s (less jitter), with room for a
    # slow box; without back-off it would be one per initial_delay_s: 400 reads.
    assert 0 < after - before <= n * 4 / (MAX_DELAY_S * 0.8) * 1.5
    assert metric_sum(text, "orchestrator_polls_total", workspace="down", result="connection") > 0
    assert metric_sum(text, "orchestrator_workspace_up", workspace="down") == 0
    assert await rig.client.active_count() == n  # trouble is never terminal

    async with asyncio.timeout(20):
        while await rig.client.active_count():
            await asyncio.sleep(0.2)
    for t in await rig.client.trackings():
        assert t["outcome"] == "deadline_exceeded"
        assert t["result"]["last_error"]["kind"] == "connection"


async def test_5xx_storm_backs_off_per_tracking_and_ends_truthfully(rig: Rig) -> None:
    await set_faults(
        rig.session,
        rig.sim_url,
        [{"route": "job_status", "fault": "http_5xx", "status": 503, "end_s": 5}],
    )
    ends = ["Completed", "Failed", "Cancelled"] * 3
    ids = [await script(rig.session, rig.sim_url, "function_job", e, 2.0) for e in ends]
    for rid in ids:
        status, _ = await rig.client.post(
            "/v1/trackings", {"kind": "function_job", "remote_id": rid}
        )
        assert status == 201
    async with asyncio.timeout(30):
        while await rig.client.active_count():
            await asyncio.sleep(0.2)
    outcomes = {t["remote_id"]: t["outcome"] for t in await rig.client.trackings()}
    assert outcomes == {rid: EXPECTED[end] for rid, end in zip(ids, ends, strict=True)}
    for rid in ids:
        during = [r for r in await rig.requests(rid) if r["status"] == 503]
        # The ramp 0.05, 0.1, 0.2, 0.4, 0.8 then 1 s: about 9 reads in 5 s.
        assert 3 <= len(during) <= 16, len(during)
    text = await rig.client.metrics()
    assert metric_sum(text, "orchestrator_polls_total", result="http_5xx") > 0


async def test_429_storm_blocks_the_whole_workspace_for_retry_after(rig: Rig) -> None:
    retry_after = 2
    await set_faults(
        rig.session,
        rig.sim_url,
        [
            {
                "route": "job_status",
                "fault": "rate_limited",
                "retry_after_s": retry_after,
                "end_s": 5,
            }
        ],
    )
    ids = [
        await script(rig.session, rig.sim_url, "function_job", "Completed", 1.0) for _ in range(12)
    ]
    for rid in ids:
        status, _ = await rig.client.post(
            "/v1/trackings", {"kind": "function_job", "remote_id": rid}
        )
        assert status == 201
    async with asyncio.timeout(30):
        while await rig.client.active_count():
            await asyncio.sleep(0.2)
    assert {t["outcome"] for t in await rig.client.trackings()} == {"succeeded"}

    log = []
    for rid in ids:
        log += [(r["t"], r["status"]) for r in await rig.requests(rid)]
    log.sort()
    limited = [t for t, status in log if status == 429]
    assert limited
    # Reads already on the wire when the first 429 came back may land just
    # after it; nothing else may arrive before Retry-After has passed.
    for t429 in limited:
        early = [t for t, _ in log if t429 + 0.3 < t < t429 + retry_after - 0.1]
        assert not early, (t429, early)
    # About one burst per Retry-After window (5 s / 2 s), never a read per tracking per 50 ms.
    assert len(limited) <= len(ids) * 4
