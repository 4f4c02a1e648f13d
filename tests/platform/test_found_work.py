"""Kinds trigger_work and action_work against the simulator, through the API and events."""

from __future__ import annotations

from typing import Any

import pytest

from tests.platform.conftest import Api, events_of, set_jobs

RECORDS = "/api/workspace/entities"
OPS = "/api/workspace/admin/function-operations"
SHIPPED = "bind-order-shipped"


async def save(api: Api, entity_id: str, correlation_id: str | None = None) -> dict[str, Any]:
    body = {"Status": "Shipped"} if correlation_id is None else {"CorrelationId": correlation_id}
    status, answer = await api.sim("PUT", f"{RECORDS}/Order/records/{entity_id}", body)
    assert status == 200, answer
    return answer  # type: ignore[no-any-return]


async def ops_jobs(api: Api, **query: str) -> list[dict[str, Any]]:
    qs = "&".join(f"{k}={v}" for k, v in query.items())
    status, page = await api.sim("GET", f"{OPS}/jobs?{qs}")
    assert status == 200, page
    return page["Items"]  # type: ignore[no-any-return]


async def terminal_event(api: Api, tracking_id: str) -> dict[str, Any]:
    events = await events_of(api, tracking_id)
    ends = [e for e in events if e["type"].split(".")[-1] != "status_changed"]
    assert len(ends) == 1, events
    return ends[0]  # type: ignore[no-any-return]


async def test_trigger_work_succeeds_with_the_runs_result(api: Api) -> None:
    await set_jobs(api, pickup_s=0.05, duration_s=0.1, sequence=["success"])
    tracking = await api.track(
        kind="trigger_work", trigger_binding_id=SHIPPED, entity_id="ord-1", labels={"t": "ok"}
    )
    assert tracking["remote_id"] is None  # no job seen yet
    assert tracking["filter"]["trigger_binding_id"] == SHIPPED
    await save(api, "ord-2")  # another record: not this work
    await save(api, "ord-1")
    final = await api.wait_terminal(tracking["tracking_id"])
    assert final["outcome"] == "succeeded", final
    [job] = await ops_jobs(api, TriggerBindingId=SHIPPED, EntityId="ord-1")
    assert final["remote_id"] == job["JobId"]
    [entry] = final["result"]["jobs"]
    assert entry["job_id"] == job["JobId"] and entry["status"] == "Completed"
    assert entry["run_status"] == "Success" and entry["attempts"] == 1
    assert entry["result_summary"] and entry["result_data"] is not None
    assert final["result"]["seen"] == {"matched": 1, "expected": 1}
    event = await terminal_event(api, tracking["tracking_id"])
    assert event["type"].endswith(".succeeded")
    assert event["data"]["result"]["jobs"][0]["job_id"] == job["JobId"]
    # Followed through the operations route, never the runtime job route.
    paths = [r["path"] for r in await api.requests_for(job["JobId"])]
    assert f"{OPS}/jobs/{job['JobId']}" in paths
    assert not [p for p in paths if p.startswith("/api/workspace/functions/jobs/")]


async def test_trigger_work_by_correlation_id_fails_with_the_error_summary(api: Api) -> None:
    await set_jobs(api, pickup_s=0.05, duration_s=0.1, max_attempts=1, sequence=["failed"])
    tracking = await api.track(
        kind="trigger_work",
        trigger_binding_id=SHIPPED,
        filter_correlation_id="corr-7",
        correlation_id="my-own-tag",
    )
    await save(api, "ord-9", "corr-70")  # the search matches it too: not this work
    await save(api, "ord-8", "corr-7")
    final = await api.wait_terminal(tracking["tracking_id"])
    assert final["outcome"] == "failed", final
    [entry] = final["result"]["jobs"]
    assert entry["status"] == "Failed" and entry["run_status"] == "Failed"
    assert entry["error_summary"] and entry["last_error"]
    [job] = await ops_jobs(api, TriggerBindingId=SHIPPED, EntityId="ord-8")
    assert entry["job_id"] == job["JobId"]
    assert final["correlation_id"] == "my-own-tag"


async def test_a_retried_job_is_one_job_with_two_runs_judged_by_the_last(api: Api) -> None:
    await set_jobs(
        api, pickup_s=0.05, duration_s=0.1, retry_delay_s=0.1, sequence=["failed", "success"]
    )
    tracking = await api.track(kind="trigger_work", trigger_binding_id=SHIPPED, entity_id="o-3")
    await save(api, "o-3")
    final = await api.wait_terminal(tracking["tracking_id"])
    assert final["outcome"] == "succeeded", final
    [entry] = final["result"]["jobs"]
    assert entry["attempts"] == 2 and entry["run_status"] == "Success"
    status, runs = await api.sim("GET", f"{OPS}/runs?EntityId=o-3&TriggerBindingId={SHIPPED}")
    assert status == 200
    mine = [r for r in runs["Items"] if r["JobId"] == entry["job_id"]]
    last = max(mine, key=lambda r: r["Attempt"])
    assert len(mine) == 2 and entry["run_id"] == last["RunId"]


async def test_no_matching_job_within_the_deadline(api: Api) -> None:
    tracking = await api.track(
        kind="trigger_work", trigger_binding_id=SHIPPED, entity_id="never", timeout_s=0.6
    )
    final = await api.wait_terminal(tracking["tracking_id"])
    assert final["outcome"] == "deadline_exceeded"
    result = final["result"]
    assert result["seen"] == {"matched": 0, "expected": 1} and result["jobs"] == []
    assert result["remote_id"] is None
    assert result["detail"] == f"no matching job seen since {final['filter']['since']}"


async def test_a_deadline_names_the_job_still_leased(api: Api) -> None:
    await set_jobs(api, pickup_s=0.05, duration_s=60, sequence=["success"])
    tracking = await api.track(
        kind="trigger_work", trigger_binding_id=SHIPPED, entity_id="slow", timeout_s=1.0
    )
    await save(api, "slow")
    final = await api.wait_terminal(tracking["tracking_id"])
    assert final["outcome"] == "deadline_exceeded"
    [entry] = final["result"]["jobs"]
    assert entry["status"] == "Leased"
    assert final["result"]["detail"] == f"job {entry['job_id']} still Leased"


async def test_two_expected_jobs(api: Api) -> None:
    await set_jobs(api, pickup_s=0.05, duration_s=0.1, sequence=["success"])
    tracking = await api.track(
        kind="trigger_work", trigger_binding_id=SHIPPED, entity_id="o-5", expect_jobs=2
    )
    await save(api, "o-5")
    status, now = await api.call("GET", f"/v1/trackings/{tracking['tracking_id']}")
    assert status == 200 and now["state"] == "active"  # one of two jobs
    await save(api, "o-5")
    final = await api.wait_terminal(tracking["tracking_id"])
    assert final["outcome"] == "succeeded", final
    assert final["result"]["seen"] == {"matched": 2, "expected": 2}
    found = await ops_jobs(api, TriggerBindingId=SHIPPED, EntityId="o-5")
    ids = [e["job_id"] for e in final["result"]["jobs"]]
    assert sorted(ids) == sorted(j["JobId"] for j in found) and len(set(ids)) == 2
    assert final["remote_id"] == ids[0]


async def test_the_same_filter_tracked_twice_is_one_tracking(api: Api) -> None:
    body = {"kind": "trigger_work", "trigger_binding_id": SHIPPED, "entity_id": "o-6"}
    status, first = await api.call("POST", "/v1/trackings", json=body)
    assert status == 201, first
    status, again = await api.call("POST", "/v1/trackings", json={**body, "expect_jobs": 3})
    assert status == 200 and again["tracking_id"] == first["tracking_id"]
    assert again["filter"]["expect_jobs"] == 1
    since = {**body, "since": "2026-01-01T00:00:00Z"}
    status, other = await api.call("POST", "/v1/trackings", json=since)
    assert status == 201 and other["tracking_id"] != first["tracking_id"]
    status, same = await api.call(
        "POST", "/v1/trackings", json={**body, "since": "2026-01-01T01:00:00+01:00"}
    )
    assert status == 200 and same["tracking_id"] == other["tracking_id"]


async def test_action_work_for_an_entity_and_a_global_action(api: Api) -> None:
    await set_jobs(api, pickup_s=0.05, duration_s=0.1, sequence=["success"])
    entity = await api.track(kind="action_work", action_id="act-order-approve", entity_id="o-1")
    glob = await api.track(kind="action_work", action_id="act-search-reindex")
    status, answer = await api.sim(
        "POST", f"{RECORDS}/Order/records/o-1/actions/act-order-approve/enqueue", {}
    )
    assert status == 200, answer
    entity_job = answer["Data"]["JobId"]
    status, answer = await api.sim("POST", "/api/workspace/actions/act-search-reindex/enqueue", {})
    assert status == 200, answer
    global_job = answer["Data"]["JobId"]
    for tracking, job_id in ((entity, entity_job), (glob, global_job)):
        final = await api.wait_terminal(tracking["tracking_id"])
        assert final["outcome"] == "succeeded", final
        assert final["remote_id"] == job_id
        assert final["result"]["jobs"][0]["run_status"] == "Success"


async def test_action_work_by_the_job_id_its_enqueue_answered(api: Api) -> None:
    await set_jobs(api, pickup_s=0.05, duration_s=0.1, max_attempts=1, sequence=["failed"])
    status, answer = await api.sim("POST", "/api/workspace/actions/act-search-reindex/enqueue", {})
    assert status == 200, answer
    job_id = answer["Data"]["JobId"]
    tracking = await api.track(kind="action_work", job_id=job_id)
    assert tracking["remote_id"] == job_id
    final = await api.wait_terminal(tracking["tracking_id"])
    assert final["outcome"] == "failed"
    assert final["result"]["jobs"][0]["error_summary"]
    paths = [r["path"] for r in await api.requests_for(job_id)]
    assert paths and all(not p.startswith("/api/workspace/functions/jobs/") for p in paths)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "trigger_work", "entity_id": "e"}, "trigger_binding_id"),
        ({"kind": "trigger_work", "trigger_binding_id": "b"}, "entity_id"),
        ({"kind": "trigger_work", "trigger_binding_id": "b", "entity_id": "e", "expect_jobs": 0}, "expect_jobs"),
        ({"kind": "trigger_work", "trigger_binding_id": "b", "entity_id": "e", "expect_jobs": 101}, "expect_jobs"),
        ({"kind": "trigger_work", "trigger_binding_id": "b", "entity_id": "e", "since": "yesterday"}, "since"),
        ({"kind": "trigger_work", "trigger_binding_id": "b", "entity_id": "e", "action_id": "a"}, "action_id"),
        ({"kind": "trigger_work", "trigger_binding_id": "b/../x", "entity_id": "e"}, "trigger_binding_id"),
        ({"kind": "trigger_work", "remote_id": "J-1"}, "remote_id"),
        ({"kind": "action_work"}, "action_id"),
        ({"kind": "action_work", "job_id": "J-1", "expect_jobs": 2}, "expect_jobs"),
        ({"kind": "action_work", "job_id": "J-1", "since": "2026-01-01T00:00:00Z"}, "since"),
        ({"kind": "action_work", "action_id": "a", "filter_correlation_id": "c"}, "filter_correlation_id"),
        ({"kind": "function_job", "remote_id": "J-1", "entity_id": "e"}, "entity_id"),
    ],
)  # fmt: skip
async def test_bad_filter_intake_is_a_422_naming_the_field(
    api: Api, body: dict[str, Any], field: str
) -> None:
    status, problem = await api.call("POST", "/v1/trackings", json=body)
    assert status == 422, problem
    assert problem["field"] == field


async def test_metrics_say_the_filter_names_came_from_openapi(api: Api) -> None:
    text = await api.metrics_text()
    for route in ("function_jobs", "function_runs"):
        assert (
            f'orchestrator_filter_names_fallback{{route="{route}",workspace="default"}} 0.0' in text
        )
