"""Every request to a workspace passes one gate: its rate limit and Retry-After hold for all."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.core.conftest import StartService
from tests.platform.conftest import occurrences, set_jobs, wait_for

LIMIT = 5
RETRY_AFTER_S = 3


def worst_second(times: list[float]) -> int:
    times = sorted(times)
    return max((sum(1 for t in times[i:] if t < s + 1.0) for i, s in enumerate(times)), default=0)


async def test_rate_limit_and_retry_after_hold_for_every_kind_of_request(
    start_service: StartService, sim_url: str
) -> None:
    api = await start_service(
        polling={"initial_delay_s": 0.05, "max_delay_s": 0.3, "jitter": 0.0},
        workspaces=[
            {
                "name": "default",
                "base_url": sim_url,
                "max_requests_per_second": LIMIT,
                "request_timeout_s": 2,
                # Two rows a page: the schedule's occurrences take several pages.
                "list_page_size": 2,
            }
        ],
    )
    await set_jobs(api, pickup_s=0.05, duration_s=0.1, sequence=["success"])
    status, out = await api.sim(
        "POST",
        "/_sim/schedules",
        {"ScheduleId": "sch-gate", "FunctionKey": "billing.sync-invoices", "Cron": "*/1 * * * * *"},
    )
    assert status == 201, out
    schedule = await api.track(kind="schedule", remote_id="sch-gate", timeout_s=120)
    status, made = await api.sim("POST", "/_sim/jobs/bulk", {"count": 3})
    assert status == 201, made
    jobs = [await api.track(kind="function_job", remote_id=rid) for rid in made["ids"]]
    # One job that stays Queued, to be cancelled while CanCancel is true.
    await set_jobs(api, pickup_s=3600)
    status, queued = await api.sim("POST", "/_sim/jobs/bulk", {"count": 1})
    assert status == 201, queued
    held = await api.track(kind="function_job", remote_id=queued["ids"][0])

    for job in jobs:
        final = await api.wait_terminal(job["tracking_id"], timeout=60)
        assert final["outcome"] == "succeeded"
        assert final["result"]["attempts"] is not None  # its runs were read
    await wait_for(api, schedule["tracking_id"], lambda ev: len(occurrences(ev)) >= 4, 60)
    status, answer = await api.call("POST", f"/v1/trackings/{held['tracking_id']}/cancel")
    assert status == 202, answer

    # Every request the simulator saw, of every kind, within the limit in any second.
    status, log = await api.sim("GET", "/_sim/requests")
    assert status == 200
    seen: list[dict[str, Any]] = log["requests"]
    routes = {r["route"] for r in seen}
    assert {"job_status", "job_cancel", "admin", "openapi"} <= routes, routes
    pages = [r for r in seen if r["route"] == "admin" and "function-operations" in r["path"]]
    assert len(pages) > 10  # list pages of the schedule and run history were read
    assert worst_second([r["t"] for r in seen]) <= LIMIT

    # A 429 with Retry-After on one read stops every kind of request until it passes.
    rule = {"route": "*", "fault": "rate_limited", "retry_after_s": RETRY_AFTER_S, "max_hits": 1}
    status, _ = await api.sim("PUT", "/_sim/faults", {"rules": [rule]})
    assert status == 200
    async with asyncio.timeout(20):
        while True:
            status, log = await api.sim("GET", "/_sim/requests")
            hit = [r for r in log["requests"] if r["status"] == 429]
            if hit:
                break
            await asyncio.sleep(0.05)
    blocked_at = hit[0]["t"]
    # Meanwhile a cancel is refused at once, with the wait, and sends nothing.
    status, answer = await api.call("POST", f"/v1/trackings/{held['tracking_id']}/cancel")
    assert status == 503, answer
    await asyncio.sleep(RETRY_AFTER_S + 1.5)
    status, log = await api.sim("GET", "/_sim/requests")
    after = [r for r in log["requests"] if r["t"] > blocked_at]
    # Requests already on their way when the 429 was answered may still arrive.
    inside = [r for r in after if r["t"] < blocked_at + RETRY_AFTER_S - 0.05]
    assert all(r["t"] < blocked_at + 0.05 for r in inside), inside
    resumed = {r["route"] for r in after if r["t"] >= blocked_at + RETRY_AFTER_S - 0.05}
    assert "admin" in resumed and "job_status" in resumed, resumed
    assert worst_second([r["t"] for r in log["requests"]]) <= LIMIT


async def test_every_workspace_request_names_the_replica(
    start_service: StartService, sim_url: str
) -> None:
    """Status reads and the cancel both carry ``X-Orchestrator-Replica``, as the
    simulator's request log shows."""
    api = await start_service(
        server={"replica_id": "replica-a"},
        polling={"initial_delay_s": 0.05, "max_delay_s": 0.2},
    )
    rid = await api.script("function_job", [{"after_s": 0, "status": "Queued"}])
    tracking = await api.track(kind="function_job", remote_id=rid)
    async with asyncio.timeout(20):
        while not await api.requests_for(rid):
            await asyncio.sleep(0.05)
    status, answer = await api.call("POST", f"/v1/trackings/{tracking['tracking_id']}/cancel")
    assert status == 202, answer
    await api.wait_terminal(tracking["tracking_id"])
    logged = await api.requests_for(rid)
    assert {r["method"] for r in logged} == {"GET", "POST"}
    assert {r["replica"] for r in logged} == {"replica-a"}
