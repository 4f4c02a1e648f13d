"""Administrative stop of a retry chain: queued, live leased, expired lease, idempotency, staleness."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.simulator.conftest import JOBS, OPS, call, enqueue, poll_until, set_job

QUEUED, LEASED, COMPLETED, FAILED, CANCELLED = range(5)
STOP = "job.retry.stopRequested"


async def projection(client: aiohttp.ClientSession, job_id: str) -> dict[str, Any]:
    status, body = await call(client, "GET", f"{OPS}/jobs/{job_id}")
    assert status == 200, body
    return body  # type: ignore[no-any-return]


async def stop(client: aiohttp.ClientSession, job_id: str, modified_at: str) -> tuple[int, Any]:
    return await call(
        client, "POST", f"{OPS}/jobs/{job_id}/stop-retries", {"ExpectedModifiedAt": modified_at}
    )


async def test_queued_job_is_finalized_immediately(client: aiohttp.ClientSession) -> None:
    await set_job(client, pickup_s=5)
    job = await enqueue(client)
    current = await projection(client, job["JobId"])
    assert current["CanStopRetries"] is True and current["RetryStopState"] == "None"
    status, body = await stop(client, job["JobId"], current["ModifiedAt"])
    assert status == 200
    assert body["Status"] == CANCELLED
    assert body["CancellationReasonCode"] == STOP
    assert body["RetryStopState"] == "Stopped" and body["CanStopRetries"] is False
    assert STOP in body["ReasonCodes"]
    # The same command again is idempotent, whatever version it names.
    status, again = await stop(client, job["JobId"], current["ModifiedAt"])
    assert status == 200 and again["Status"] == CANCELLED
    status, again = await stop(client, job["JobId"], "2001-01-01T00:00:00Z")
    assert status == 200 and again["CancellationReasonCode"] == STOP


async def test_retry_wait_is_queued_and_finalized(client: aiohttp.ClientSession) -> None:
    await set_job(
        client, pickup_s=0.05, duration_s=0.1, retry_delay_s=5, sequence=["failed", "success"]
    )
    job = await enqueue(client)
    waiting = (await poll_until(client, f"{JOBS}/{job['JobId']}", lambda b: b["WillRetry"]))[-1]
    status, body = await stop(client, job["JobId"], waiting["ModifiedAt"])
    assert status == 200 and body["Status"] == CANCELLED and body["WillRetry"] is False
    assert body["NextRunAt"] is None and body["CurrentAttempt"] == 1


async def test_live_lease_success_wins(client: aiohttp.ClientSession) -> None:
    await set_job(client, pickup_s=0, duration_s=0.8, outcomes={"success": 1})
    job = await enqueue(client)
    leased = (await poll_until(client, f"{JOBS}/{job['JobId']}", lambda b: b["Status"] == LEASED))[
        -1
    ]
    status, body = await stop(client, job["JobId"], leased["ModifiedAt"])
    assert status == 200
    assert body["Status"] == LEASED and body["RetryStopState"] == "Requested"
    assert body["CancellationReasonCode"] == STOP and body["CanStopRetries"] is False
    status, again = await stop(client, job["JobId"], leased["ModifiedAt"])
    assert status == 200 and again["RetryStopState"] == "Requested"
    final = (await poll_until(client, f"{JOBS}/{job['JobId']}", lambda b: b["Status"] != LEASED))[
        -1
    ]
    assert final["Status"] == COMPLETED and final["Run"]["Status"] == 1
    assert final["RetryStopState"] == "Stopped"


async def test_live_lease_failure_creates_no_later_attempt(client: aiohttp.ClientSession) -> None:
    await set_job(
        client,
        pickup_s=0,
        duration_s=0.5,
        max_attempts=3,
        retry_delay_s=0.05,
        outcomes={"failed": 1},
    )
    job = await enqueue(client)
    leased = (await poll_until(client, f"{JOBS}/{job['JobId']}", lambda b: b["Status"] == LEASED))[
        -1
    ]
    status, _ = await stop(client, job["JobId"], leased["ModifiedAt"])
    assert status == 200
    final = (await poll_until(client, f"{JOBS}/{job['JobId']}", lambda b: b["Status"] != LEASED))[
        -1
    ]
    assert final["Status"] == CANCELLED and final["CurrentAttempt"] == 1
    assert final["CancellationReasonCode"] == STOP and final["LastError"]
    status, runs = await call(client, "GET", f"{OPS}/runs?FunctionId=fn-billing-sync")
    assert runs["Total"] == 1


async def test_expired_lease_is_finalized_immediately(client: aiohttp.ClientSession) -> None:
    await set_job(client, pickup_s=0, outcomes={"hang": 1}, lease_timeout_s=0.2)
    job = await enqueue(client)
    expired = (
        await poll_until(
            client, f"{JOBS}/{job['JobId']}", lambda b: "job.lease.expired" in b["ReasonCodes"]
        )
    )[-1]
    assert expired["Status"] == LEASED
    status, body = await stop(client, job["JobId"], expired["ModifiedAt"])
    assert status == 200 and body["Status"] == CANCELLED
    assert body["Run"]["Status"] == 4 and body["Run"]["CompletedAt"]


async def test_stale_version_conflicts(client: aiohttp.ClientSession) -> None:
    await set_job(client, pickup_s=0.1, duration_s=5)
    job = await enqueue(client)
    queued_version = job["ModifiedAt"]
    await poll_until(client, f"{JOBS}/{job['JobId']}", lambda b: b["Status"] == LEASED)
    status, body = await stop(client, job["JobId"], queued_version)
    assert status == 409 and body["Status"] == LEASED
    assert (await projection(client, job["JobId"]))["RetryStopState"] == "None"


async def test_terminal_job_conflicts(client: aiohttp.ClientSession) -> None:
    await set_job(client, pickup_s=0, duration_s=0.05, outcomes={"success": 1})
    job = await enqueue(client)
    final = (
        await poll_until(client, f"{JOBS}/{job['JobId']}", lambda b: b["Status"] == COMPLETED)
    )[-1]
    status, body = await stop(client, job["JobId"], final["ModifiedAt"])
    assert status == 409 and body["Status"] == COMPLETED


async def test_bad_requests(client: aiohttp.ClientSession) -> None:
    await set_job(client, pickup_s=5)
    job = await enqueue(client)
    path = f"{OPS}/jobs/{job['JobId']}/stop-retries"
    for body in (None, {}, {"ExpectedModifiedAt": 3}, {"ExpectedModifiedAt": "yesterday"}, [1]):
        status, answer = await call(client, "POST", path, body)
        assert status == 400, (body, answer)
    status, _ = await stop(client, "job-unknown", job["ModifiedAt"])
    assert status == 404
