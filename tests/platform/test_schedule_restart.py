"""A restart of the service mid-schedule reports every occurrence exactly once."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import aiohttp

from orchestrator.service import Service
from tests.platform.conftest import Api, make_settings, occurrences, set_jobs, wait_for


async def _start(tmp_path: Path, sim_url: str) -> tuple[Api, asyncio.Task[int]]:
    service = Service(make_settings(tmp_path, sim_url))
    ready = asyncio.Event()

    async def on_ready(_: Service) -> None:
        ready.set()

    task = asyncio.create_task(service.run(on_ready))
    async with asyncio.timeout(15):
        await ready.wait()
    api = Api(f"http://127.0.0.1:{service.port}", aiohttp.ClientSession(), service, sim_url)
    return api, task


async def _stop(api: Api, task: asyncio.Task[int]) -> None:
    api.service.request_stop()
    try:
        assert await asyncio.wait_for(task, 15) == 0
    finally:
        await api.session.close()


async def test_restart_mid_schedule_without_duplicates(tmp_path: Path, sim_url: str) -> None:
    api, task = await _start(tmp_path, sim_url)
    try:
        await set_jobs(api, pickup_s=0.05, duration_s=1.5, sequence=["success"])
        status, out = await api.sim(
            "POST",
            "/_sim/schedules",
            {"ScheduleId": "sch-restart", "FunctionKey": "ops.tick", "Cron": "*/1 * * * * *"},
        )
        assert status == 201, out
        tracking = await api.track(kind="schedule", remote_id="sch-restart", timeout_s=120)
        tid = tracking["tracking_id"]
        await wait_for(api, tid, lambda ev: len(occurrences(ev)) >= 2)
    finally:
        await _stop(api, task)

    await asyncio.sleep(2.5)  # occurrences finish while nobody watches
    api, task = await _start(tmp_path, sim_url)
    try:
        await wait_for(api, tid, lambda ev: len(occurrences(ev)) >= 6)
        # The resumed schedule tracking counts as read by this process.
        assert 'orchestrator_resume_pending{workspace="default"} 0.0' in await api.metrics_text()
        status, _ = await api.sim("PATCH", "/_sim/schedules/sch-restart", {"Enabled": False})
        assert status == 200
        final = await api.wait_terminal(tid, timeout=20)
        assert final["outcome"] == "cancelled"
        events = await wait_for(api, tid, lambda ev: ev[-1]["type"].endswith(".cancelled"))
        found = occurrences(events)
        counts = Counter(o["key"] for o in found)
        assert all(n == 1 for n in counts.values()), counts
        assert final["result"]["occurrences_reported"] == len(found)
        # Every finished job of the schedule, as the workspace lists it, was reported.
        status, jobs = await api.sim(
            "GET",
            "/api/workspace/admin/function-operations/jobs?ScheduleId=sch-restart&Limit=1000",
        )
        assert status == 200
        finished = {j["JobId"] for j in jobs["Items"] if j["Status"] == 2}
        reported = {o["job_id"] for o in found if not o["skipped"]}
        assert finished - reported <= {final["result"]["schedule"]["ActiveJobId"]}
        assert any(o["skipped"] for o in found)
    finally:
        await _stop(api, task)
