"""A sealed group on three PostgreSQL replicas, one killed mid-run: exactly one group
event, whose counts match the members' outcomes, read the same on every replica."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from tests.integration.test_replicas import EXPECTED, Cluster, cluster  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow

N = 90
BOUND_S = 120.0


async def test_one_group_event_across_replicas_with_one_killed(cluster: Cluster) -> None:  # noqa: F811
    c = cluster
    ends = list(EXPECTED)
    plan: dict[str, str] = {}
    for i in range(N):
        end = ends[i % 3]
        steps = [
            {"after_s": 0, "status": "Queued"},
            {"after_s": 0.3 + (i % 5) * 0.2, "status": "Leased"},
            {"after_s": 1.5 + (i % 9) * 0.4, "status": end},
        ]
        async with c.session.post(
            f"{c.sim.url}/_sim/script", json={"kind": "function_job", "steps": steps}
        ) as resp:
            assert resp.status == 201
            plan[str((await resp.json())["id"])] = EXPECTED[end]
    items = [{"kind": "function_job", "remote_id": rid, "timeout_s": 300} for rid in plan]
    # A third through each replica; the last batch seals the group.
    for n, replica in enumerate(c.replicas):
        part = items[n * N // 3 : (n + 1) * N // 3]
        body = {"items": part, "group": "release-7", "seal": n == 2}
        async with c.session.post(f"{replica.url}/v1/trackings/batch", json=body) as resp:
            assert resp.status == 200, await resp.text()
    async with asyncio.timeout(30):  # r0 holds and reads some of them, then dies
        while not any(r["replica"] == "r0" for rid in plan for r in c.sim.state.log.requests(rid)):
            await asyncio.sleep(0.05)
    c.replicas[0].kill()
    survivor = c.replicas[1]
    async with asyncio.timeout(BOUND_S):
        while not (await c.get(survivor, "/v1/groups/release-7?wait=20"))["ended"]:
            pass
    for replica in c.replicas[1:]:
        group = await c.get(replica, "/v1/groups/release-7")
        assert group["state"] == "completed"
        assert group["members"] == {"total": N, "active": 0, "terminal": N}
        page = await c.get(replica, "/v1/trackings?group=release-7&limit=1000")
        assert {t["remote_id"]: t["outcome"] for t in page["items"]} == plan
        feed = await c.get(replica, "/v1/events?after=0&limit=1000")
        events = feed["events"]
        while feed["events"]:
            feed = await c.get(replica, f"/v1/events?after={feed['next_after']}&limit=1000")
            events += feed["events"]
        grouped = [e for e in events if e["type"].startswith("com.moltaro.orchestrator.group.")]
        assert [e["type"] for e in grouped] == ["com.moltaro.orchestrator.group.completed"]
        outcomes = {k: v for k, v in grouped[0]["data"]["outcomes"].items() if v}
        assert outcomes == dict(Counter(plan.values()))
