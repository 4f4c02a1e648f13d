"""The workspace's request limit holds over every one-second window, as Moltaro sees it."""

from __future__ import annotations

import asyncio

from tests.core.conftest import StartService

LIMIT = 20


async def test_requests_never_exceed_the_limit_in_any_second(
    start_service: StartService, sim_url: str
) -> None:
    api = await start_service(
        polling={"initial_delay_s": 0.05, "max_delay_s": 0.1, "jitter": 0.0},
        workspaces=[
            {
                "name": "default",
                "base_url": sim_url,
                "max_requests_per_second": LIMIT,
                "request_timeout_s": 2,
            }
        ],
    )
    # 40 jobs read every 0.1 s would ask for 400 requests a second.
    status, _ = await api.sim("PUT", "/_sim/profile", {"job": {"pickup_s": 3600}})
    assert status == 200
    status, made = await api.sim("POST", "/_sim/jobs/bulk", {"count": 40})
    assert status == 201, made
    for rid in made["ids"]:
        await api.track(kind="function_job", remote_id=rid)
    await asyncio.sleep(3.0)
    times: list[float] = []
    for rid in made["ids"]:
        times += [r["t"] for r in await api.requests_for(rid) if r["route"] != "control"]
    times.sort()
    assert len(times) > LIMIT  # it was asked for far more than the limit
    worst = max(sum(1 for t in times[i:] if t < start + 1.0) for i, start in enumerate(times))
    assert worst <= LIMIT, f"{worst} requests in one second, limit {LIMIT}"
