"""A traced tracking handed from one replica to another on PostgreSQL keeps the
caller's trace: the replica that accepted it is killed mid-wait, another takes the
lease over and emits the terminal event with the caller's ``traceparent``."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.test_replicas import Cluster, cluster  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow

CALLER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
STATE = "vendor=opaque"


async def test_a_taken_over_tracking_keeps_the_callers_trace(cluster: Cluster) -> None:  # noqa: F811
    c = cluster
    first, others = c.replicas[0], c.replicas[1:]
    steps = [{"after_s": 0, "status": "Queued"}, {"after_s": 8, "status": "Completed"}]
    async with c.session.post(
        f"{c.sim.url}/_sim/script", json={"kind": "function_job", "steps": steps}
    ) as resp:
        rid = str((await resp.json())["id"])
    async with c.session.post(
        f"{first.url}/v1/trackings",
        json={"kind": "function_job", "remote_id": rid, "timeout_s": 120},
        headers={"traceparent": CALLER, "tracestate": STATE},
    ) as resp:
        assert resp.status == 201, await resp.text()
        tracking_id = (await resp.json())["tracking_id"]
    async with asyncio.timeout(30):  # read by the replica that holds it, then killed
        while not any(r["replica"] == "r0" for r in c.sim.state.log.requests(rid)):
            await asyncio.sleep(0.05)
    first.kill()
    async with asyncio.timeout(60):
        while (await c.get(others[0], f"/v1/trackings/{tracking_id}"))["state"] != "terminal":
            await asyncio.sleep(0.2)
    assert {r["replica"] for r in c.sim.state.log.requests(rid)} & {"r1", "r2"}  # taken over
    feed = (await c.get(others[1], "/v1/events?after=0"))["events"]
    [terminal] = [e for e in feed if e["subject"] == tracking_id]
    assert terminal["type"].endswith(".succeeded")
    assert (terminal["traceparent"], terminal["tracestate"]) == (CALLER, STATE)
