"""Work with no id handed to a caller: entity saves' trigger jobs, UI action jobs, and
list filters that really filter (also under the names a renamed installation uses)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest

from orchestrator.simulator import create_app, start_simulator
from orchestrator.simulator.enums import JOB_SOURCE
from tests.simulator.conftest import JOBS, OPS, call, set_job

RECORDS = "/api/workspace/entities"


async def save(
    client: aiohttp.ClientSession, entity: str, entity_id: str, **body: Any
) -> dict[str, Any]:
    status, answer = await call(client, "PUT", f"{RECORDS}/{entity}/records/{entity_id}", body)
    assert status == 200, answer
    return answer  # type: ignore[no-any-return]


async def jobs(client: aiohttp.ClientSession, **filters: str) -> list[dict[str, Any]]:
    status, page = await call(client, "GET", f"{OPS}/jobs?{urlencode(filters)}")
    assert status == 200, page
    assert page["Total"] == len(page["Items"])
    return page["Items"]  # type: ignore[no-any-return]


async def test_a_save_commits_then_queues_a_job_per_trigger_binding(
    client: aiohttp.ClientSession,
) -> None:
    await set_job(client, pickup_s=5)
    answer = await save(client, "Order", "ord-1", CorrelationId="corr-1", Status="Shipped")
    # The save answers the record, never a job id: the work is found by filter.
    assert answer["Saved"] is True and answer["CorrelationId"] == "corr-1"
    assert "JobId" not in answer
    found = await jobs(client, EntityId="ord-1")
    assert sorted(j["TriggerBindingId"] for j in found) == [
        "bind-order-audit",
        "bind-order-shipped",
    ]
    for job in found:
        assert job["Source"] == JOB_SOURCE.value("Trigger")
        assert job["CorrelationId"] == "corr-1" and job["EntityId"] == "ord-1"
        # Trigger jobs are seen through Function operations, not the runtime route.
        status, _ = await call(client, "GET", f"{JOBS}/{job['JobId']}")
        assert status == 404
        status, detail = await call(client, "GET", f"{OPS}/jobs/{job['JobId']}")
        assert status == 200 and detail["JobId"] == job["JobId"]
    # A save without a correlation id gets one from the platform; no trigger, no job.
    other = await save(client, "Invoice", "inv-1")
    assert other["CorrelationId"] and await jobs(client, EntityId="inv-1") == []


async def test_ui_actions_answer_a_queued_job_with_their_action_id(
    client: aiohttp.ClientSession,
) -> None:
    await set_job(client, pickup_s=5)
    path = f"{RECORDS}/Order/records/ord-7/actions/act-order-approve/enqueue"
    status, answer = await call(client, "POST", path, {"Input": {"note": "ok"}})
    assert status == 200, answer
    job = answer["Data"]
    assert job["ActionId"] == "act-order-approve" and job["EntityId"] == "ord-7"
    assert job["Source"] == JOB_SOURCE.value("Action") and job["Status"] == 0
    status, answer = await call(client, "POST", "/api/workspace/actions/act-search-reindex/enqueue")
    assert status == 200, answer
    assert answer["Data"]["ActionId"] == "act-search-reindex" and answer["Data"]["EntityId"] is None
    # Validation is request-blocking: a refused action queues nothing.
    refused = {
        "/api/workspace/actions/act-order-approve/enqueue": 400,  # needs a record
        f"{RECORDS}/Order/records/o1/actions/act-search-reindex/enqueue": 400,  # global
        f"{RECORDS}/Invoice/records/i1/actions/act-order-approve/enqueue": 400,  # other entity
        "/api/workspace/actions/act-nope/enqueue": 404,
    }
    for bad, expected in refused.items():
        status, body = await call(client, "POST", bad)
        assert status == expected, (bad, body)
    status, body = await call(client, "POST", path, {"Input": "not an object"})
    assert status == 400, body
    assert len(await jobs(client, Source="Action")) == 2


async def test_an_enqueue_of_a_command_contract_is_refused(client: aiohttp.ClientSession) -> None:
    # An Enqueue publication on a Command contract: the catalog contract is the truth.
    status, body = await call(client, "POST", "/api/workspace/functions/totals.recalculate/enqueue")
    assert status == 409 and "Command" in body["detail"]
    assert await jobs(client, FunctionId="fn-totals-recalc") == []


@pytest.fixture(params=[False, True], ids=["aiohttp", "front"])
async def stepped(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[aiohttp.ClientSession, list[float]]]:
    """A simulator whose clock moves only when the test moves it (``now[0]``), so two
    jobs differ in CreatedAt however fast the machine creates them."""
    now = [1_800_000_000.0]
    app = create_app("fast", 7, clock=lambda: now[0])
    async with (
        await start_simulator(app=app, front=request.param) as running,
        aiohttp.ClientSession(base_url=running.url) as session,
    ):
        yield session, now


async def test_every_declared_filter_excludes_what_it_should(
    stepped: tuple[aiohttp.ClientSession, list[float]],
) -> None:
    """Fails if the simulator ignores any of these filters: each query has rows to keep
    out (other bindings, records, actions, correlation ids, older jobs)."""
    client, now = stepped
    await set_job(client, pickup_s=5)
    await save(client, "Order", "ord-1", CorrelationId="corr-alpha")
    await save(client, "Order", "ord-2", CorrelationId="corr-beta")
    now[0] += 1.0  # the two action jobs are a second newer than the four trigger jobs
    newer: set[str] = set()
    for path in (
        f"{RECORDS}/Order/records/ord-1/actions/act-order-approve/enqueue",
        "/api/workspace/actions/act-search-reindex/enqueue",
    ):
        status, answer = await call(client, "POST", path)
        assert status == 200, answer
        newer.add(answer["Data"]["JobId"])
    everything = await jobs(client)
    assert len(everything) == 6
    cases: dict[str, tuple[dict[str, str], Any]] = {
        "binding": (
            {"TriggerBindingId": "bind-order-audit"},
            ("TriggerBindingId", "bind-order-audit"),
        ),
        "entity": ({"EntityId": "ord-1"}, ("EntityId", "ord-1")),
        "action": ({"ActionId": "act-search-reindex"}, ("ActionId", "act-search-reindex")),
        "search": ({"Search": "ALPHA"}, ("CorrelationId", "corr-alpha")),
    }
    for name, (query, (field, value)) in cases.items():
        found = await jobs(client, **query)
        assert found, name
        assert all(j[field] == value for j in found), (name, found)
        assert len(found) < len(everything), name
    both = await jobs(client, TriggerBindingId="bind-order-shipped", EntityId="ord-2")
    assert [(j["TriggerBindingId"], j["EntityId"]) for j in both] == [
        ("bind-order-shipped", "ord-2")
    ]
    newest = max(j["CreatedAt"] for j in everything)
    later = await jobs(client, From=newest)
    assert {j["JobId"] for j in later} == newer, later
    status, runs = await call(client, "GET", f"{OPS}/runs?EntityId=ord-1")
    assert status == 200 and runs["Items"] == []  # nothing leased yet


@pytest.fixture
async def renamed() -> AsyncIterator[aiohttp.ClientSession]:
    running = await start_simulator(profile="renamed", seed=3)
    async with running, aiohttp.ClientSession(base_url=running.url) as session:
        yield session


async def test_a_renamed_installation_declares_and_reads_its_own_names(
    renamed: aiohttp.ClientSession,
) -> None:
    status, doc = await call(renamed, "GET", "/swagger/v1/swagger.json")
    assert status == 200
    ops = "/api/workspace/admin/function-operations"
    names = {p["name"] for p in doc["paths"][f"{ops}/jobs"]["get"]["parameters"]}
    assert {"bindingId", "recordId", "uiActionId", "createdFrom", "pageSize"} <= names
    assert not names & {"TriggerBindingId", "EntityId", "Search", "From", "Limit"}
    run_names = {p["name"] for p in doc["paths"][f"{ops}/runs"]["get"]["parameters"]}
    assert "startedFrom" in run_names
    await save(renamed, "Order", "ord-1")
    await save(renamed, "Order", "ord-2")
    # Its own name filters; the documented one is not a parameter here and is ignored.
    assert {j["EntityId"] for j in await jobs(renamed, recordId="ord-1")} == {"ord-1"}
    assert {j["EntityId"] for j in await jobs(renamed, EntityId="ord-1")} == {"ord-1", "ord-2"}
    status, page = await call(renamed, "GET", f"{OPS}/jobs?pageSize=1&Limit=50")
    assert status == 200 and len(page["Items"]) == 1 and page["Total"] == 4
