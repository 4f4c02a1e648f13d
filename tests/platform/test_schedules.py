"""Schedule trackings against the simulator: occurrences, overlap skips, disable, delete."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.platform.conftest import Api, occurrences, set_jobs, wait_for

OCCURRENCE = "com.moltaro.orchestrator.tracking.occurrence"
EVERY_SECOND = "*/1 * * * * *"


async def make_schedule(api: Api, sid: str, cron: str = EVERY_SECOND, **extra: Any) -> None:
    body = {"ScheduleId": sid, "FunctionKey": "billing.sync-invoices", "Cron": cron, **extra}
    status, out = await api.sim("POST", "/_sim/schedules", body)
    assert status == 201, out


async def schedule_jobs(api: Api, sid: str, since: str) -> set[str]:
    """The ids of the jobs the simulator holds for a schedule, created at or after ``since``."""
    status, body = await api.sim(
        "GET", f"/api/workspace/admin/function-operations/jobs?ScheduleId={sid}&Limit=1000"
    )
    assert status == 200, body
    return {j["JobId"] for j in body["Items"] if j["CreatedAt"] >= since}


async def active_job(api: Api, sid: str) -> str:
    """The job the schedule names active, once it names one."""
    async with asyncio.timeout(10):
        while True:
            status, body = await api.sim("GET", f"/api/workspace/admin/function-schedules/{sid}")
            assert status == 200, body
            if body["ActiveJobId"]:
                return str(body["ActiveJobId"])
            await asyncio.sleep(0.05)


async def test_occurrences_with_an_overlap_skip_then_disabled(api: Api) -> None:
    # Each job runs ~1.5 s, so with one occurrence a second every other one overlaps.
    await set_jobs(api, pickup_s=0.05, duration_s=1.5, sequence=["success"])
    await make_schedule(api, "sch-every-second")
    tracking = await api.track(kind="schedule", remote_id="sch-every-second", timeout_s=60)
    assert tracking["kind"] == "schedule"

    def enough(events: list[dict[str, Any]]) -> bool:
        occ = occurrences(events)
        return sum(o["skipped"] for o in occ) >= 1 and sum(not o["skipped"] for o in occ) >= 2

    await wait_for(api, tracking["tracking_id"], enough)
    # Disabled while a job of it runs: that job is still followed and reported.
    running = await active_job(api, "sch-every-second")
    status, _ = await api.sim("PATCH", "/_sim/schedules/sch-every-second", {"Enabled": False})
    assert status == 200
    final = await api.wait_terminal(tracking["tracking_id"], timeout=20)
    assert final["outcome"] == "cancelled"
    assert final["result"]["reason"] == "schedule_disabled"
    assert final["remote_status"] == "Disabled"
    events = await wait_for(
        api, tracking["tracking_id"], lambda ev: ev[-1]["type"].endswith(".cancelled")
    )
    found = occurrences(events)
    assert [e["type"] for e in events].count(OCCURRENCE) == final["result"]["occurrences_reported"]
    assert final["result"]["last_occurrence"]["job_id"] == running
    done = {o["job_id"]: o for o in found if not o["skipped"]}
    skipped = [o for o in found if o["skipped"]]
    assert skipped and len(done) >= 2
    for o in done.values():
        assert o["job_status"] == "Completed"
        assert o["run_status"] == "Success"
        assert o["completed_at"] is not None and o["run_id"] and o["result_summary"]
    for o in skipped:
        assert o["job_id"] is None and o["run_status"] == "Skipped"
        # It overlapped a job of this schedule that was itself reported, and fell
        # between that job's creation and its end.
        overlapped = done[o["active_job_id"]]
        assert overlapped["occurred_at"] <= o["occurred_at"] < overlapped["completed_at"]
    keys = [o["key"] for o in found]
    assert len(keys) == len(set(keys)), "an occurrence was reported twice"
    # Every job the schedule created while tracked was reported, the last one too.
    created = await schedule_jobs(api, "sch-every-second", tracking["created_at"])
    assert running in created and created == set(done)
    # Events carry the tracking resource too.
    assert events[0]["data"]["tracking_id"] == tracking["tracking_id"]


async def test_deleted_schedule_ends_not_found_after_its_job_and_confirmations(api: Api) -> None:
    await set_jobs(api, pickup_s=0.05, duration_s=1.0, sequence=["success"])
    await make_schedule(api, "sch-doomed")
    tracking = await api.track(kind="schedule", remote_id="sch-doomed", timeout_s=60)
    running = await active_job(api, "sch-doomed")
    status, _ = await api.sim("DELETE", "/_sim/schedules/sch-doomed")
    assert status == 204
    final = await api.wait_terminal(tracking["tracking_id"], timeout=20)
    assert final["outcome"] == "not_found"
    assert final["result"]["reason"] == "schedule_deleted"
    assert final["result"]["confirmations"] >= 3
    # The job it had created ran on after the delete, and was reported first.
    last = final["result"]["last_occurrence"]
    assert (last["job_id"], last["job_status"]) == (running, "Completed")
    events = await wait_for(
        api, tracking["tracking_id"], lambda ev: ev[-1]["type"].endswith(".not_found")
    )
    assert running in {o["job_id"] for o in occurrences(events)}


async def test_deadline_with_no_occurrence_due(api: Api) -> None:
    await make_schedule(api, "sch-yearly", cron="0 0 1 1 *")
    tracking = await api.track(kind="schedule", remote_id="sch-yearly", timeout_s=1.5)
    final = await api.wait_terminal(tracking["tracking_id"], timeout=20)
    assert final["outcome"] == "deadline_exceeded"
    assert final["result"]["occurrences_reported"] == 0
    assert final["result"]["schedule"]["NextRunAt"] is not None
    assert final["remote"]["Schedule"]["ScheduleId"] == "sch-yearly"


async def test_failed_and_retried_occurrences_carry_their_runs(api: Api) -> None:
    await set_jobs(
        api,
        pickup_s=0.05,
        duration_s=0.1,
        retry_delay_s=0.1,
        max_attempts=2,
        sequence=["failed", "failed"],
    )
    await make_schedule(api, "sch-failing", cron="*/2 * * * * *")
    tracking = await api.track(kind="schedule", remote_id="sch-failing", timeout_s=60)
    events = await wait_for(api, tracking["tracking_id"], lambda ev: len(occurrences(ev)) >= 1)
    first = occurrences(events)[0]
    assert first["job_status"] == "Failed"
    assert first["attempts"] == 2 and first["attempt"] == 2
    assert first["run_status"] == "Failed" and first["error_summary"]
    assert first["last_error"]


async def test_schedule_intake_validation(api: Api) -> None:
    status, body = await api.call(
        "POST", "/v1/trackings", json={"kind": "schedule", "enqueue_response": {"Id": "x"}}
    )
    assert status == 422 and body["field"] == "enqueue_response"
    first = await api.track(kind="schedule", remote_id="sch-billing-nightly")
    again = await api.track(kind="schedule", remote_id="sch-billing-nightly")
    assert again["tracking_id"] == first["tracking_id"]


async def test_target_not_a_global_job_never_fires(api: Api) -> None:
    # sch-quote-refresh targets a Command function: InvalidTarget, no occurrence.
    tracking = await api.track(kind="schedule", remote_id="sch-quote-refresh", timeout_s=1.5)
    final = await api.wait_terminal(tracking["tracking_id"], timeout=20)
    assert final["outcome"] == "deadline_exceeded"
    assert final["result"]["schedule"]["TargetHealth"] == "InvalidTarget"
    assert final["result"]["occurrences_reported"] == 0
