"""Scripted timelines (``POST /_sim/script``) and the per-id request log."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

from orchestrator.clock import parse_iso
from tests.simulator.conftest import JOBS, NET, UI, call, poll_until


async def script(client: aiohttp.ClientSession, **body: Any) -> dict[str, Any]:
    status, answer = await call(client, "POST", "/_sim/script", body)
    assert status == 201, answer
    return answer  # type: ignore[no-any-return]


async def test_scripted_job_follows_its_timeline(client: aiohttp.ClientSession) -> None:
    made = await script(
        client,
        kind="function_job",
        id="job-scripted-1",
        function_key="billing.sync-invoices",
        steps=[
            {"after_s": 0.0, "status": "Queued"},
            {"after_s": 0.2, "status": "Leased"},
            {"after_s": 0.4, "status": "Queued", "next_run_at_in_s": 0.3, "last_error": "boom"},
            {"after_s": 0.7, "status": "Leased"},
            {"after_s": 0.9, "status": "Completed", "run": {"ResultSummary": "3 invoices"}},
        ],
    )
    assert made == {
        "id": "job-scripted-1",
        "kind": "function_job",
        "status_url": f"{JOBS}/job-scripted-1",
    }
    seen = await poll_until(client, made["status_url"], lambda b: b["Status"] == 2, every=0.03)
    statuses = [b["Status"] for b in seen]
    assert statuses[0] == 0 and 1 in statuses
    retry = next(b for b in seen if b["WillRetry"])
    assert retry["NextRunAt"] and retry["LastError"] == "boom" and retry["CurrentAttempt"] == 1
    final = seen[-1]
    assert final["CurrentAttempt"] == 2 and final["Run"]["Attempt"] == 2
    assert final["Run"]["Status"] == 1 and final["Run"]["ResultSummary"] == "3 invoices"
    assert final["Run"]["CompletedAt"] and final["Run"]["DurationMs"] is not None
    assert final["BusinessFunctionId"] == "fn-billing-sync"


async def test_steps_can_remove_evidence_and_answer_404(client: aiohttp.ClientSession) -> None:
    made = await script(
        client,
        kind="function_job",
        steps=[
            {"after_s": 0, "not_found": True},
            {"after_s": 0.2, "status": "Completed", "fields": {"Run": None}},
            {"after_s": 0.4, "status": "Completed", "run": {"ResultSummary": ""}},
            {"after_s": 0.6, "status": "Completed", "remove": ["Run", "LastError"]},
        ],
    )
    url = made["status_url"]
    assert (await call(client, "GET", url))[0] == 404
    await asyncio.sleep(0.25)
    assert (await call(client, "GET", url))[1]["Run"] is None
    await asyncio.sleep(0.2)
    assert (await call(client, "GET", url))[1]["Run"]["ResultSummary"] == ""
    await asyncio.sleep(0.2)
    body = (await call(client, "GET", url))[1]
    assert "Run" not in body and "LastError" not in body


async def test_scripted_cancel_follows_can_cancel(client: aiohttp.ClientSession) -> None:
    made = await script(
        client,
        kind="function_job",
        steps=[{"status": "Queued"}, {"after_s": 5, "status": "Leased"}],
    )
    status, body = await call(client, "POST", f"{made['status_url']}/cancel")
    assert status == 200 and body["Status"] == 4
    made = await script(client, kind="function_job", steps=[{"status": "Leased"}])
    status, body = await call(client, "POST", f"{made['status_url']}/cancel")
    assert status == 409 and body["Status"] == 1


async def test_scripted_builds(client: aiohttp.ClientSession) -> None:
    net = await script(
        client,
        kind="net_operation_build",
        build_kind="Check",
        steps=[
            {"status": "Queued"},
            {"after_s": 0.1, "status": "Running"},
            {"after_s": 0.2, "status": "Failed", "failure": "publication_commit_unconfirmed"},
        ],
    )
    assert net["status_url"].startswith(NET)
    final = (await poll_until(client, net["status_url"], lambda b: b["Status"] == 3))[-1]
    assert final["Kind"] == 1 and final["Failure"]["ReasonCode"] == "publication_commit_unconfirmed"
    # Its own text, not another ReasonCode's (the previous artifact stays active).
    assert final["ErrorSummary"] == final["Failure"]["Summary"]
    assert "artefact actif précédent" in final["ErrorSummary"]
    assert final["Failure"]["RemediationCode"] == "verify_publication_then_resubmit"
    assert final["StartedAt"] and final["CompletedAt"]
    ui = await script(
        client, kind="workspace_ui_build", build_kind="Check", steps=[{"status": "Succeeded"}]
    )
    assert ui["status_url"].startswith(UI)
    body = (await call(client, "GET", ui["status_url"]))[1]
    assert body["Kind"] == 0 and body["Status"] == 2 and body["ArtifactId"]


async def test_bad_scripts_are_400_and_ids_are_unique(client: aiohttp.ClientSession) -> None:
    for body in (
        {},
        {"kind": "rocket", "steps": [{"status": "Queued"}]},
        {"kind": "function_job"},
        {"kind": "function_job", "steps": []},
        {"kind": "function_job", "steps": [{"status": "Exploded"}]},
        {"kind": "function_job", "steps": [{"status": "Queued", "after_s": -1}]},
        {"kind": "function_job", "steps": [{"status": "Queued", "colour": 1}]},
        {"kind": "function_job", "steps": [{"status": "Queued", "run": 3}]},
        {"kind": "function_job", "id": "bad id", "steps": [{"status": "Queued"}]},
        {"kind": "net_operation_build", "build_kind": "Deploy", "steps": [{"status": "Queued"}]},
        {"kind": "net_operation_build", "steps": [{"status": "Failed", "failure": "nope"}]},
    ):
        status, answer = await call(client, "POST", "/_sim/script", body)
        assert status == 400, (body, answer)
    await script(client, kind="function_job", id="dup", steps=[{"status": "Queued"}])
    status, _ = await call(
        client,
        "POST",
        "/_sim/script",
        {"kind": "function_job", "id": "dup", "steps": [{"status": 0}]},
    )
    assert status == 409


async def test_request_log_records_every_request_naming_the_id(
    client: aiohttp.ClientSession,
) -> None:
    made = await script(client, id="job-logged", kind="function_job", steps=[{"status": "Queued"}])
    before = time.time()
    for _ in range(3):
        await call(client, "GET", made["status_url"])
        await asyncio.sleep(0.05)
    await call(client, "POST", f"{made['status_url']}/cancel")
    after = time.time()
    status, body = await call(client, "GET", "/_sim/requests?id=job-logged")
    entries = body["requests"]
    assert [e["route"] for e in entries] == [
        "control",
        "job_status",
        "job_status",
        "job_status",
        "job_cancel",
    ]
    assert [e["status"] for e in entries[1:]] == [200, 200, 200, 200]
    times = [e["t"] for e in entries[1:]]
    assert times == sorted(times) and before - 1 <= times[0] <= times[-1] <= after + 1
    assert times[-1] - times[0] >= 0.1
    assert entries[1]["method"] == "GET" and entries[1]["path"] == made["status_url"]
    status, body = await call(client, "GET", "/_sim/requests?id=job-unknown")
    assert body == {"requests": []}
    status, _ = await call(client, "GET", "/_sim/requests?id=")
    assert status == 400
    status, body = await call(client, "GET", "/_sim/requests")
    # Without an id: every request but the control API's, in arrival order.
    everything = body["requests"]
    assert status == 200 and [e["route"] for e in everything].count("job_status") == 3
    assert all(e["route"] != "control" for e in everything)
    assert [e["t"] for e in everything] == sorted(e["t"] for e in everything)
    status, stats = await call(client, "GET", "/_sim/stats")
    assert stats["routes"]["job_status"]["200"] == 3 and stats["total"] >= 5


async def test_reset_forgets_everything(client: aiohttp.ClientSession) -> None:
    made = await script(client, id="job-gone", kind="function_job", steps=[{"status": "Queued"}])
    await call(client, "PUT", "/_sim/faults", {"rules": [{"fault": "latency", "latency_s": 0}]})
    status, _ = await call(client, "POST", "/_sim/reset")
    assert status == 200
    assert (await call(client, "GET", made["status_url"]))[0] == 404
    assert (await call(client, "GET", "/_sim/faults"))[1] == {"rules": []}
    log = (await call(client, "GET", "/_sim/requests?id=job-gone"))[1]["requests"]
    assert [(e["route"], e["status"]) for e in log] == [("job_status", 404)]  # only after reset


async def test_script_times_are_relative_to_creation(client: aiohttp.ClientSession) -> None:
    made = await script(client, kind="function_job", steps=[{"after_s": 0.3, "status": "Queued"}])
    assert (await call(client, "GET", made["status_url"]))[0] == 404  # not yet
    await asyncio.sleep(0.35)
    status, body = await call(client, "GET", made["status_url"])
    assert status == 200
    assert parse_iso(body["ModifiedAt"]) - parse_iso(body["CreatedAt"]) >= 0.29
