"""Query, cancel, abandon, health and the API's own OpenAPI document."""

from __future__ import annotations

import asyncio

import pytest

from tests.core.conftest import Api, StartService

Q = {"after_s": 0, "status": "Queued"}


async def test_list_filters_and_cursor_paging(api: Api) -> None:
    items = [
        {"kind": "function_job", "remote_id": f"job-{i}", "labels": {"team": "a" if i % 2 else "b"}}
        for i in range(25)
    ]
    items += [{"kind": "net_operation_build", "remote_id": f"b-{i}"} for i in range(5)]
    status, _ = await api.call("POST", "/v1/trackings/batch", json={"items": items})
    assert status == 200
    seen: list[str] = []
    cursor = None
    while True:
        path = "/v1/trackings?kind=function_job&limit=7" + (f"&cursor={cursor}" if cursor else "")
        status, page = await api.call("GET", path)
        assert status == 200
        seen += [t["remote_id"] for t in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(f"job-{i}" for i in range(25))
    assert len(seen) == len(set(seen))
    _, page = await api.call("GET", "/v1/trackings?label=team:a&limit=100")
    assert {t["remote_id"] for t in page["items"]} == {f"job-{i}" for i in range(25) if i % 2}
    _, page = await api.call("GET", "/v1/trackings?kind=net_operation_build&state=active")
    assert len(page["items"]) == 5
    for bad in (
        "state=nope",
        "kind=x",
        "limit=0",
        "limit=abc",
        "outcome=won",
        "label=nocolon",
        "workspace=elsewhere",
        "cursor=%%%",
    ):
        status, problem = await api.call("GET", f"/v1/trackings?{bad}")
        assert status == 422, (bad, problem)
        assert problem["field"] == bad.split("=")[0]


async def test_unknown_tracking_is_404_problem(api: Api) -> None:
    for path in ("/v1/trackings/trk_000000000000000000000000", "/v1/trackings/nope"):
        status, problem = await api.call("GET", path)
        assert status == 404 and problem["status"] == 404
    status, problem = await api.call("GET", "/v1/no-such-route")
    assert status == 404 and problem["title"]


async def test_cancel_forwards_only_while_can_cancel(api: Api) -> None:
    queued = await api.script("function_job", [Q])
    t = await api.track(kind="function_job", remote_id=queued)
    status, body = await api.call("POST", f"/v1/trackings/{t['tracking_id']}/cancel")
    assert status == 202, body
    done = await api.wait_terminal(t["tracking_id"])
    assert done["outcome"] == "cancelled"
    posts = [r for r in await api.requests_for(queued) if r["method"] == "POST"]
    assert len(posts) == 1

    leased = await api.script("function_job", [Q, {"after_s": 0.01, "status": "Leased"}])
    t2 = await api.track(kind="function_job", remote_id=leased)
    await asyncio.sleep(0.1)
    status, problem = await api.call("POST", f"/v1/trackings/{t2['tracking_id']}/cancel")
    assert status == 409 and problem["remote_status"] == "Leased"
    assert not [r for r in await api.requests_for(leased) if r["method"] == "POST"]
    _, still = await api.call("GET", f"/v1/trackings/{t2['tracking_id']}")
    assert still["state"] == "active"

    build = await api.track(kind="workspace_ui_build", remote_id="b-1")
    status, problem = await api.call("POST", f"/v1/trackings/{build['tracking_id']}/cancel")
    assert status == 409 and problem["field"] == "kind"


async def test_abandon_stops_tracking_without_touching_remote(api: Api) -> None:
    rid = await api.script("function_job", [Q])
    t = await api.track(kind="function_job", remote_id=rid)
    status, body = await api.call("DELETE", f"/v1/trackings/{t['tracking_id']}")
    assert status == 200 and body["outcome"] == "abandoned" and body["state"] == "terminal"
    status, problem = await api.call("DELETE", f"/v1/trackings/{t['tracking_id']}")
    assert status == 409 and problem["outcome"] == "abandoned"
    before = len(await api.requests_for(rid))
    await asyncio.sleep(0.4)
    reqs = await api.requests_for(rid)
    assert len(reqs) == before
    assert {r["method"] for r in reqs} <= {"GET"}


async def test_health_readiness_openapi(api: Api) -> None:
    assert (await api.call("GET", "/healthz"))[0] == 200
    status, ready = await api.call("GET", "/readyz")
    assert status == 200 and ready["status"] == "ready"
    status, doc = await api.call("GET", "/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.1")
    intake = doc["components"]["schemas"]["IntakeBody"]
    assert set(intake["properties"]) >= {
        "kind",
        "remote_id",
        "enqueue_response",
        "deadline_at",
        "timeout_s",
        "callback_url",
        "labels",
        "notify",
    }
    assert intake["additionalProperties"] is False
    assert "/v1/trackings/{tracking_id}/cancel" in doc["paths"]


async def test_drain_refuses_intake_and_finishes_in_flight_reads(api: Api) -> None:
    rid = await api.script("function_job", [Q, {"after_s": 0.05, "status": "Completed"}])
    await api.sim(
        "PUT",
        "/_sim/faults",
        {"rules": [{"route": "job_status", "fault": "latency", "latency_s": 1.0}]},
    )
    t = await api.track(kind="function_job", remote_id=rid)
    # Wait until the (slow) read is in flight, then ask the service to stop.
    async with asyncio.timeout(10):
        while not await api.requests_for(rid):
            await asyncio.sleep(0.02)
    api.service.request_stop()
    await asyncio.sleep(0.1)
    status, problem = await api.call(
        "POST", "/v1/trackings", json={"kind": "function_job", "remote_id": "late"}
    )
    assert status == 503 and problem["status"] == 503
    status, ready = await api.call("GET", "/readyz")
    assert status == 503 and "draining" in ready["reasons"]
    # The read that was in flight finished within the grace period and its
    # terminal state was written before the store closed.
    running = [task for task in asyncio.all_tasks() if task.get_name() == "service-under-test"]
    assert await asyncio.wait_for(running[0], 10) == 0
    from orchestrator.store.sqlite import SqliteStore

    store = SqliteStore(api.service.settings.store.path)
    await store.open()
    try:
        stored = await store.get_tracking(t["tracking_id"])
        assert stored is not None and stored.outcome == "succeeded"
    finally:
        await store.close()


async def test_readiness_answers_when_the_store_hangs(
    start_service: StartService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that takes no write and never answers (a hung database link) makes the
    service not ready at once, rather than leaving the probe waiting."""
    from orchestrator.store.sqlite import SqliteStore

    api = await start_service()
    hung = asyncio.Event()

    async def never(self: SqliteStore) -> bool:
        await hung.wait()
        return True

    monkeypatch.setattr(SqliteStore, "check_writable", never)
    async with asyncio.timeout(5):  # a probe that waited on the store would hang here
        status, ready = await api.call("GET", "/readyz")
    assert status == 503
    assert ready["reasons"] == ["store did not answer within 0.8 s"]
    hung.set()
