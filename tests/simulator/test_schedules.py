"""Schedules: due CRON occurrences enqueue jobs; an overlap is recorded as a Skipped run."""

from __future__ import annotations

import asyncio

import aiohttp

from tests.simulator.conftest import OPS, call, enqueue, set_job

SCHEDULES = "/api/workspace/admin/function-schedules"


async def test_occurrences_enqueue_and_overlaps_are_skipped(client: aiohttp.ClientSession) -> None:
    # Each job takes ~1.5 s, longer than the 1 s cadence, so every other occurrence overlaps.
    await set_job(client, pickup_s=0.05, duration_s=1.4, outcomes={"success": 1})
    status, schedule = await call(
        client,
        "POST",
        "/_sim/schedules",
        {"ScheduleId": "sch-test", "FunctionKey": "billing.sync-invoices", "Cron": "* * * * * *"},
    )
    assert status == 201, schedule
    assert schedule["Status"] == "Enabled" and schedule["NextRunAt"]
    assert schedule["TargetHealth"] == "Healthy" and schedule["ActiveJobId"] is None
    await asyncio.sleep(3.2)
    # Disabled before it is read: an occurrence between two reads would count in one.
    status, disabled = await call(client, "PATCH", "/_sim/schedules/sch-test", {"Enabled": False})
    assert status == 200 and disabled["Status"] == "Disabled" and disabled["NextRunAt"] is None
    status, jobs = await call(
        client, "GET", f"{OPS}/jobs?Source=Schedule&ScheduleId=sch-test&Limit=50"
    )
    assert status == 200 and jobs["Total"] >= 1
    assert all(j["Source"] == 1 and j["ScheduleId"] == "sch-test" for j in jobs["Items"])
    status, runs = await call(
        client, "GET", f"{OPS}/runs?Source=Schedule&ScheduleId=sch-test&Limit=50"
    )
    skipped = [r for r in runs["Items"] if r["Status"] == 3 and r["JobId"] is None]
    assert skipped, runs
    assert skipped[0]["ResultData"]["ActiveJobId"] in {j["JobId"] for j in jobs["Items"]}
    status, only_skipped = await call(
        client, "GET", f"{OPS}/runs?ScheduleId=sch-test&Status=Skipped"
    )
    assert only_skipped["Total"] == len(skipped)
    # Disabling stopped new occurrences but left the active job alone.
    count = jobs["Total"] + len(skipped)
    await asyncio.sleep(1.1)
    status, jobs_after = await call(client, "GET", f"{OPS}/jobs?ScheduleId=sch-test")
    status, runs_after = await call(client, "GET", f"{OPS}/runs?ScheduleId=sch-test&Status=Skipped")
    assert jobs_after["Total"] + runs_after["Total"] <= count + 1
    status, one = await call(client, "GET", f"{SCHEDULES}/sch-test")
    assert status == 200 and one["LastStatus"] in ("Skipped", "Queued", "Leased", "Completed")
    assert (await call(client, "DELETE", "/_sim/schedules/sch-test"))[0] == 204
    assert (await call(client, "GET", f"{SCHEDULES}/sch-test"))[0] == 404
    assert (await call(client, "DELETE", "/_sim/schedules/sch-test"))[0] == 404


async def test_an_occurrence_is_skipped_while_the_function_has_work_from_any_source(
    client: aiohttp.ClientSession,
) -> None:
    # An API-enqueued job of the target function, not the schedule's own, is running.
    await set_job(client, pickup_s=0.05, duration_s=2.5, outcomes={"success": 1})
    api_job = await enqueue(client, "billing.sync-invoices")
    status, _ = await call(
        client,
        "POST",
        "/_sim/schedules",
        {"ScheduleId": "sch-busy", "FunctionKey": "billing.sync-invoices", "Cron": "* * * * * *"},
    )
    assert status == 201
    await asyncio.sleep(1.2)
    status, jobs = await call(client, "GET", f"{OPS}/jobs?ScheduleId=sch-busy")
    status, runs = await call(client, "GET", f"{OPS}/runs?ScheduleId=sch-busy&Status=Skipped")
    assert jobs["Total"] == 0, jobs  # no job while the API's job is queued or running
    assert runs["Total"] >= 1
    assert {r["ResultData"]["ActiveJobId"] for r in runs["Items"]} == {api_job["JobId"]}
    assert all(r["JobId"] is None and r["Status"] == 3 for r in runs["Items"])


async def test_non_job_target_never_enqueues(client: aiohttp.ClientSession) -> None:
    status, schedule = await call(
        client,
        "POST",
        "/_sim/schedules",
        {"BusinessFunctionId": "fn-pricing-quote", "Cron": "* * * * * *"},
    )
    assert status == 201 and schedule["TargetHealth"] == "InvalidTarget"
    await asyncio.sleep(1.1)
    status, jobs = await call(client, "GET", f"{OPS}/jobs?ScheduleId={schedule['ScheduleId']}")
    assert jobs["Total"] == 0


async def test_schedule_control_validation(client: aiohttp.ClientSession) -> None:
    for body in (
        {},
        {"FunctionKey": "a.b"},
        {"FunctionKey": "a.b", "Cron": "every day"},
        {"FunctionKey": "a.b", "Cron": "61 * * * *"},
        {"FunctionKey": "a.b", "Cron": "* * * * *", "TimeZone": "Mars/Olympus"},
        {"FunctionKey": "a.b", "Cron": "* * * * *", "Enabled": "yes"},
        {"ScheduleId": "sch-billing-nightly", "FunctionKey": "a.b", "Cron": "* * * * *"},
    ):
        status, answer = await call(client, "POST", "/_sim/schedules", body)
        assert status in (400, 409), (body, answer)
    assert (await call(client, "PATCH", "/_sim/schedules/nope", {"Enabled": True}))[0] == 404
    status, _ = await call(client, "PATCH", "/_sim/schedules/sch-billing-nightly", {"Cron": "x"})
    assert status == 400


async def test_creating_a_schedule_runs_nothing_immediately(client: aiohttp.ClientSession) -> None:
    status, schedule = await call(
        client,
        "POST",
        "/_sim/schedules",
        {"FunctionKey": "billing.sync-invoices", "Cron": "0 0 1 1 *", "TimeZone": "Europe/Paris"},
    )
    assert status == 201 and schedule["NextRunAt"].endswith("Z")
    status, jobs = await call(client, "GET", f"{OPS}/jobs?ScheduleId={schedule['ScheduleId']}")
    assert jobs["Total"] == 0
