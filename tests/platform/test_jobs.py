"""Run history of finished function jobs, and the retry-chain stop."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.platform.conftest import Api, StartService, set_jobs


async def enqueue(api: Api, key: str = "ops.sync") -> dict[str, Any]:
    status, body = await api.sim("POST", f"/api/workspace/functions/{key}/enqueue", {})
    assert status == 200, body
    return body["Data"]  # type: ignore[no-any-return]


async def admin_job(api: Api, job_id: str) -> dict[str, Any]:
    status, body = await api.sim("GET", f"/api/workspace/admin/function-operations/jobs/{job_id}")
    assert status == 200, body
    return body  # type: ignore[no-any-return]


async def test_run_history_across_retries(api: Api) -> None:
    await set_jobs(
        api,
        pickup_s=0.05,
        duration_s=0.1,
        retry_delay_s=0.1,
        max_attempts=3,
        sequence=["failed", "timed_out", "success"],
    )
    job = await enqueue(api)
    tracking = await api.track(kind="function_job", remote_id=job["JobId"])
    final = await api.wait_terminal(tracking["tracking_id"])
    assert final["outcome"] == "succeeded"
    result = final["result"]
    assert result["attempts_error"] is None
    attempts = result["attempts"]
    assert [a["attempt"] for a in attempts] == [1, 2, 3]
    assert [a["status"] for a in attempts] == ["Failed", "TimedOut", "Success"]
    assert len({a["run_id"] for a in attempts}) == 3
    assert attempts[0]["error_summary"] and attempts[2]["result_summary"]
    # The job's own delivery state stays as the job reported it.
    assert final["remote"]["CurrentAttempt"] == 3
    assert final["remote"]["Run"]["RunId"] == attempts[-1]["run_id"]


async def test_run_history_keeps_only_this_jobs_runs(api: Api) -> None:
    await set_jobs(
        api, pickup_s=0.05, duration_s=0.1, retry_delay_s=0.1, sequence=["failed", "success"]
    )
    first, second = await enqueue(api), await enqueue(api)
    t1 = await api.track(kind="function_job", remote_id=first["JobId"])
    t2 = await api.track(kind="function_job", remote_id=second["JobId"])
    for t in (t1, t2):
        final = await api.wait_terminal(t["tracking_id"])
        attempts = final["result"]["attempts"]
        assert [a["attempt"] for a in attempts] == [1, 2]
        assert attempts[-1]["run_id"] == final["remote"]["Run"]["RunId"]


async def test_one_attempt_is_its_own_history_and_reads_no_runs(api: Api) -> None:
    await set_jobs(api, pickup_s=0.05, duration_s=0.1, sequence=["success"])
    job = await enqueue(api)
    tracking = await api.track(kind="function_job", remote_id=job["JobId"])
    final = await api.wait_terminal(tracking["tracking_id"])
    run = final["remote"]["Run"]
    assert final["result"]["attempts_error"] is None
    assert [(a["run_id"], a["status"]) for a in final["result"]["attempts"]] == [
        (run["RunId"], "Success")
    ]
    status, log = await api.sim("GET", "/_sim/requests")
    assert status == 200
    assert not [r for r in log["requests"] if "function-operations/runs" in r["path"]]


async def test_unreadable_run_history_never_changes_the_outcome(api: Api) -> None:
    await set_jobs(
        api, pickup_s=0.05, duration_s=0.1, retry_delay_s=0.1, sequence=["failed", "success"]
    )
    status, _ = await api.sim(
        "PUT", "/_sim/faults", {"rules": [{"route": "admin", "fault": "http_5xx"}]}
    )
    assert status == 200
    job = await enqueue(api)
    tracking = await api.track(kind="function_job", remote_id=job["JobId"])
    final = await api.wait_terminal(tracking["tracking_id"])
    assert final["outcome"] == "succeeded"
    assert final["result"]["attempts"] is None
    assert "HTTP 500" in final["result"]["attempts_error"]
    assert final["result"]["run_status"] == "Success"


async def test_stop_retries_on_a_queued_job(api: Api) -> None:
    await set_jobs(api, pickup_s=30, duration_s=0.1, sequence=["success"])
    job = await enqueue(api)
    tracking = await api.track(kind="function_job", remote_id=job["JobId"])
    path = f"/v1/trackings/{tracking['tracking_id']}/stop-retries"
    status, body = await api.call("POST", path)
    assert status == 202, body
    assert body["CancellationReasonCode"] == "job.retry.stopRequested"
    assert body["RetryStopState"] == "Stopped"
    assert body["remote"]["JobId"] == job["JobId"]
    assert body["expected_modified_at"] == job["ModifiedAt"]
    final = await api.wait_terminal(tracking["tracking_id"])
    assert final["outcome"] == "cancelled"
    assert final["remote"]["CancellationReasonCode"] == "job.retry.stopRequested"
    # After the end, the tracking is terminal: a stop is refused by us, not forwarded.
    status, body = await api.call("POST", path)
    assert status == 409 and body["outcome"] == "cancelled"


async def test_stop_retries_on_a_live_leased_attempt_is_cooperative(api: Api) -> None:
    await set_jobs(
        api,
        pickup_s=0.05,
        duration_s=1.5,
        retry_delay_s=0.1,
        max_attempts=3,
        sequence=["failed", "failed", "success"],
    )
    job = await enqueue(api)
    tracking = await api.track(kind="function_job", remote_id=job["JobId"])
    async with asyncio.timeout(10):
        while (await admin_job(api, job["JobId"]))["Status"] != 1:
            await asyncio.sleep(0.05)
    path = f"/v1/trackings/{tracking['tracking_id']}/stop-retries"
    status, body = await api.call("POST", path)
    assert status == 202, body
    assert body["RetryStopState"] == "Requested"
    assert body["remote_status"] == "Leased"
    assert body["CancellationReasonCode"] == "job.retry.stopRequested"
    # Repeating an accepted stop is idempotent.
    status, again = await api.call("POST", path)
    assert status == 200, again
    assert again["already_requested"] is True
    assert again["CancellationReasonCode"] == "job.retry.stopRequested"
    # The attempt fails and no later attempt starts: Cancelled, one run.
    final = await api.wait_terminal(tracking["tracking_id"])
    assert final["outcome"] == "cancelled"
    assert final["remote"]["RetryStopState"] == "Stopped"
    assert [a["attempt"] for a in final["result"]["attempts"]] == [1]


async def test_stop_retries_with_a_stale_version_is_a_409(api: Api) -> None:
    await set_jobs(api, pickup_s=0.05, duration_s=5, sequence=["success"])
    job = await enqueue(api)
    tracking = await api.track(kind="function_job", remote_id=job["JobId"])
    async with asyncio.timeout(10):
        while (await admin_job(api, job["JobId"]))["Status"] != 1:
            await asyncio.sleep(0.05)
    # The version seen at enqueue (Queued) is stale now that the job is Leased.
    path = f"/v1/trackings/{tracking['tracking_id']}/stop-retries"
    status, body = await api.call("POST", path, json={"expected_modified_at": job["ModifiedAt"]})
    assert status == 409, body
    assert body["title"] == "Stale version"
    assert body["stale"] is True and body["field"] == "expected_modified_at"
    assert "stale" in body["detail"]
    assert body["current_modified_at"] != job["ModifiedAt"]
    assert body["remote_status"] == "Leased"
    # Nothing was stopped; the current version works.
    assert (await admin_job(api, job["JobId"]))["RetryStopState"] == "None"
    status, body = await api.call("POST", path)
    assert status == 202, body


async def test_stop_retries_refusals(api: Api) -> None:
    build = await api.script("net_operation_build", [{"after_s": 0, "status": "Running"}])
    t = await api.track(kind="net_operation_build", remote_id=build)
    status, body = await api.call("POST", f"/v1/trackings/{t['tracking_id']}/stop-retries")
    assert status == 409 and body["field"] == "kind"
    status, body = await api.call("POST", "/v1/trackings/trk_000000000000000000000000/stop-retries")
    assert status == 404
    job = await enqueue(api)
    t = await api.track(kind="function_job", remote_id=job["JobId"])
    status, body = await api.call(
        "POST", f"/v1/trackings/{t['tracking_id']}/stop-retries", json={"other": 1}
    )
    assert status == 422 and body["field"] == "body"


async def tracked_remote(api: Api, tracking_id: str, remote_status: str) -> dict[str, Any]:
    """The tracking's stored status body once it has read ``remote_status``."""
    async with asyncio.timeout(10):
        while True:
            status, body = await api.call("GET", f"/v1/trackings/{tracking_id}")
            assert status == 200, body
            if body["remote_status"] == remote_status:
                return body["remote"]  # type: ignore[no-any-return]
            await asyncio.sleep(0.05)


def posts(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in requests if r["method"] == "POST" and r["path"].endswith("/stop-retries")]


async def test_stop_retries_while_can_stop_retries_is_false_sends_nothing(
    start_service: StartService,
) -> None:
    # A read that changes nothing waits 100 times longer than the one before: once the
    # second read is logged the poller is quiet for 5 s, so every request the handler
    # makes (none, it must be) is its own.
    api = await start_service(polling={"multiplier": 100.0, "max_delay_s": 30})
    fields = {"CanStopRetries": False, "RetryStopState": "Unavailable"}
    rid = await api.script("function_job", [{"after_s": 0, "status": "Leased", "fields": fields}])
    tracking = await api.track(kind="function_job", remote_id=rid)
    remote = await tracked_remote(api, tracking["tracking_id"], "Leased")
    async with asyncio.timeout(10):
        while len(await api.requests_for(rid)) < 2:
            await asyncio.sleep(0.02)
    path = f"/v1/trackings/{tracking['tracking_id']}/stop-retries"
    before = len(await api.requests_for(rid))
    status, body = await api.call("POST", path, json={"expected_modified_at": remote["ModifiedAt"]})
    assert status == 409, body
    assert body["title"] == "Cannot stop retries" and body["stale"] is False
    assert body["RetryStopState"] == "Unavailable" and "RetryStopState" in body["detail"]
    assert body["CanStopRetries"] is False
    # Decided on the projection the tracking holds: no request to the workspace at all.
    assert len(await api.requests_for(rid)) == before
    # Without a version the projection is read, and still nothing is POSTed.
    status, body = await api.call("POST", path)
    assert status == 409, body
    assert posts(await api.requests_for(rid)) == []


async def test_a_stop_already_accepted_answers_already_requested_whatever_its_version(
    api: Api,
) -> None:
    await set_jobs(api, pickup_s=0.05, duration_s=3, sequence=["success"])
    job = await enqueue(api)
    tracking = await api.track(kind="function_job", remote_id=job["JobId"])
    async with asyncio.timeout(10):
        while (await admin_job(api, job["JobId"]))["Status"] != 1:
            await asyncio.sleep(0.05)
    path = f"/v1/trackings/{tracking['tracking_id']}/stop-retries"
    status, body = await api.call("POST", path)
    assert status == 202, body
    # A stale version, then none: already requested, and no second POST.
    for again in ({"expected_modified_at": "2000-01-01T00:00:00.000Z"}, None):
        status, body = await api.call("POST", path, json=again)
        assert status == 200, body
        assert body["already_requested"] is True
    assert len(posts(await api.requests_for(job["JobId"]))) == 1
