"""Function job lifecycles through HTTP: success, skipped, failure, retries, cancel, dedup."""

from __future__ import annotations

import time

import aiohttp

from orchestrator.clock import parse_iso
from tests.simulator.conftest import JOBS, call, enqueue, poll_until, set_job

QUEUED, LEASED, COMPLETED, FAILED, CANCELLED = range(5)
RUN_SUCCESS, RUN_FAILED, RUN_SKIPPED = 1, 2, 3


def terminal(body: dict[str, object]) -> bool:
    return body["Status"] in (COMPLETED, FAILED, CANCELLED)


async def test_enqueue_answers_the_queued_status_model(client: aiohttp.ClientSession) -> None:
    await set_job(client, pickup_s=5)
    model = await enqueue(client, CorrelationId="req-42")
    assert model["Status"] == QUEUED
    assert model["CanCancel"] is True
    assert model["TimeoutSeconds"] == 300  # captured from the API publication
    assert model["CorrelationId"] == "req-42"
    assert model["Run"] is None
    assert model["StatusUrl"] == f"{JOBS}/{model['JobId']}"
    assert model["BusinessFunctionId"] == "fn-billing-sync"
    assert model["CreatedAt"].endswith("Z")


async def test_timeout_seconds_is_null_unless_a_publication_declares_it(
    client: aiohttp.ClientSession,
) -> None:
    # The profile's runtime default (300 s) is not the job's TimeoutSeconds: a key
    # without a publication shows null. (The catalog's one publication without a
    # timeout, totals.recalculate, is on a Command contract and cannot be enqueued.)
    await set_job(client, pickup_s=5, timeout_seconds=300)
    assert (await enqueue(client, "adhoc.cleanup"))["TimeoutSeconds"] is None
    assert (await enqueue(client, "reports.nightly-export"))["TimeoutSeconds"] == 900


async def test_success_publishes_completed_only_with_run_evidence(
    client: aiohttp.ClientSession,
) -> None:
    await set_job(client, pickup_s=0.1, duration_s=0.3, outcomes={"success": 1})
    job = await enqueue(client)
    seen = await poll_until(client, f"{JOBS}/{job['JobId']}", terminal)
    statuses = [b["Status"] for b in seen]
    assert LEASED in statuses
    leased = next(b for b in seen if b["Status"] == LEASED)
    assert leased["CanCancel"] is False
    assert leased["Run"]["Status"] == 0 and leased["Run"]["CompletedAt"] is None
    final = seen[-1]
    assert final["Status"] == COMPLETED
    run = final["Run"]
    assert run["Status"] == RUN_SUCCESS
    assert run["CompletedAt"] and run["DurationMs"] >= 0 and run["ResultSummary"]
    assert run["JobId"] == job["JobId"] and run["RunId"] != job["JobId"]
    assert final["CurrentAttempt"] == 1 and final["LastError"] is None


async def test_skipped_run_completes_the_job(client: aiohttp.ClientSession) -> None:
    await set_job(client, pickup_s=0.05, duration_s=0.1, outcomes={"skipped": 1})
    job = await enqueue(client)
    final = (await poll_until(client, f"{JOBS}/{job['JobId']}", terminal))[-1]
    assert final["Status"] == COMPLETED
    assert final["Run"]["Status"] == RUN_SKIPPED
    assert final["Run"]["ResultSummary"] and final["Run"]["DurationMs"] is not None


async def test_failure_exhausts_attempts_with_diagnostics(client: aiohttp.ClientSession) -> None:
    await set_job(client, pickup_s=0.05, duration_s=0.1, outcomes={"failed": 1}, max_attempts=1)
    job = await enqueue(client)
    final = (await poll_until(client, f"{JOBS}/{job['JobId']}", terminal))[-1]
    assert final["Status"] == FAILED
    assert final["LastError"] and final["Run"]["ErrorSummary"]
    assert final["Run"]["Status"] == RUN_FAILED
    assert final["RemainingAttempts"] == 0 and final["WillRetry"] is False


async def test_retry_waits_for_next_run_at_then_succeeds_in_a_new_run(
    client: aiohttp.ClientSession,
) -> None:
    await set_job(
        client,
        pickup_s=0.05,
        duration_s=0.15,
        retry_delay_s=0.6,
        max_attempts=3,
        sequence=["failed", "success"],
    )
    job = await enqueue(client)
    path = f"{JOBS}/{job['JobId']}"
    waiting = (await poll_until(client, path, lambda b: b["WillRetry"] is True))[-1]
    assert waiting["Status"] == QUEUED and waiting["CanCancel"] is True
    assert parse_iso(waiting["NextRunAt"]) > time.time()
    assert waiting["CurrentAttempt"] == 1 and waiting["RemainingAttempts"] == 2
    assert waiting["Run"]["Status"] == RUN_FAILED and waiting["LastError"]
    first_run = waiting["Run"]["RunId"]
    final = (await poll_until(client, path, terminal))[-1]
    assert final["Status"] == COMPLETED and final["CurrentAttempt"] == 2
    assert final["Run"]["RunId"] != first_run and final["Run"]["Attempt"] == 2
    assert final["Run"]["Status"] == RUN_SUCCESS
    status, runs = await call(
        client,
        "GET",
        f"/api/workspace/admin/function-operations/runs?FunctionId={job['BusinessFunctionId']}",
    )
    assert status == 200
    assert [r["Attempt"] for r in runs["Items"]] == [2, 1]  # job and runs are separate records


async def test_cancel_while_queued_then_refused(client: aiohttp.ClientSession) -> None:
    await set_job(client, pickup_s=5)
    job = await enqueue(client)
    status, body = await call(client, "POST", f"{JOBS}/{job['JobId']}/cancel")
    assert status == 200
    assert body["Status"] == CANCELLED and body["CanCancel"] is False
    status, body = await call(client, "POST", f"{JOBS}/{job['JobId']}/cancel")
    assert status == 409 and body["Status"] == CANCELLED
    status, body = await call(client, "GET", f"{JOBS}/{job['JobId']}")
    assert body["Status"] == CANCELLED


async def test_cancel_refused_while_leased(client: aiohttp.ClientSession) -> None:
    await set_job(client, pickup_s=0, duration_s=5)
    job = await enqueue(client)
    await poll_until(client, f"{JOBS}/{job['JobId']}", lambda b: b["Status"] == LEASED)
    status, body = await call(client, "POST", f"{JOBS}/{job['JobId']}/cancel")
    assert status == 409
    assert body["title"] == "Conflict" and body["status"] == 409 and body["Status"] == LEASED


async def test_dedup_key_suppresses_only_while_active(client: aiohttp.ClientSession) -> None:
    await set_job(client, pickup_s=0.2, duration_s=0.2, outcomes={"success": 1})
    first = await enqueue(client, DeduplicationKey="invoice-7")
    again = await enqueue(client, DeduplicationKey="invoice-7")
    assert again["JobId"] == first["JobId"]
    other = await enqueue(client, DeduplicationKey="invoice-8")
    assert other["JobId"] != first["JobId"]
    await poll_until(client, f"{JOBS}/{first['JobId']}", terminal)
    after = await enqueue(client, DeduplicationKey="invoice-7")
    assert after["JobId"] != first["JobId"] and after["Status"] == QUEUED


async def test_catalog_publications_gate_enqueue(client: aiohttp.ClientSession) -> None:
    cases = {
        "imports.legacy-csv": 404,  # retired
        "payroll.run": 409,  # disabled
        "pricing.quote": 404,  # a Command publication
        "orders.approve": 404,  # in the catalog, never published for the API
        "bad key!": 400,
    }
    for key, expected in cases.items():
        status, body = await call(client, "POST", f"/api/workspace/functions/{key}/enqueue")
        assert status == expected, (key, body)
    ad_hoc = await enqueue(client, "adhoc.work")
    assert ad_hoc["BusinessFunctionId"] == "fn-adhoc.work"


async def test_unknown_job_is_404(client: aiohttp.ClientSession) -> None:
    for method, path in (("GET", f"{JOBS}/nope"), ("POST", f"{JOBS}/nope/cancel")):
        status, body = await call(client, method, path)
        assert status == 404 and body["status"] == 404
