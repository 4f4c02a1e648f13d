"""A server-side wait on one replica for a tracking another replica holds: woken by
the store's notification of the holder's terminal write, not by its bound."""

from __future__ import annotations

import asyncio
import re

import asyncpg  # type: ignore[import-untyped]
import pytest

from tests.integration.test_replicas import Cluster, cluster  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow

BOUND_S = 30.0  # under the wait's 60 s: an answer within it was woken


async def _holder(c: Cluster, tracking_id: str) -> str:
    conn = await asyncpg.connect(c.dsn)
    try:
        async with asyncio.timeout(BOUND_S):
            while True:
                owner = await conn.fetchval(
                    "SELECT lease_owner FROM trackings WHERE tracking_id = $1", tracking_id
                )
                if owner:
                    return str(owner)
                await asyncio.sleep(0.05)
    finally:
        await conn.close()


async def test_a_wait_is_woken_by_another_replicas_terminal_write(cluster: Cluster) -> None:  # noqa: F811
    c = cluster
    steps = [{"after_s": 0, "status": "Queued"}]
    async with c.session.post(
        f"{c.sim.url}/_sim/script", json={"kind": "function_job", "steps": steps}
    ) as resp:
        rid = str((await resp.json())["id"])
    async with c.session.post(
        f"{c.replicas[0].url}/v1/trackings", json={"kind": "function_job", "remote_id": rid}
    ) as resp:
        assert resp.status == 201, await resp.text()
        tracking_id = (await resp.json())["tracking_id"]
    owner = await _holder(c, tracking_id)
    names = [f"r{i}" for i in range(3)]
    holder = c.replicas[names.index(owner)]
    waiter = next(r for r in c.replicas if r is not holder)

    async def wait() -> tuple[int, dict[str, object]]:
        async with c.session.get(f"{waiter.url}/v1/trackings/{tracking_id}?wait=60") as resp:
            return resp.status, await resp.json()

    waiting = asyncio.create_task(wait())
    async with asyncio.timeout(BOUND_S):
        while True:
            async with c.session.get(waiter.url + "/metrics") as resp:
                text = await resp.text()
            if re.search(r"^orchestrator_api_waits 1\.0$", text, re.M):
                break
            await asyncio.sleep(0.05)
    async with c.session.delete(f"{holder.url}/v1/trackings/{tracking_id}") as resp:
        assert resp.status == 200, await resp.text()
    async with asyncio.timeout(BOUND_S):
        status, body = await waiting
    assert status == 200, body
    assert body["state"] == "terminal" and body["outcome"] == "abandoned"
