"""An installation whose OpenAPI renames the Function operations filters (and has no search).

The service sends the names the document declares: had it sent the documented
ones, this simulator would ignore them (as ASP.NET binding does) and list
every job, and the trackings below would follow the wrong work.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlsplit

import pytest

from orchestrator.simulator import start_simulator
from tests.platform.conftest import Api, set_jobs, wait_for

RECORDS = "/api/workspace/entities"
OPS = "/api/workspace/admin/function-operations"


@pytest.fixture
async def sim_url() -> AsyncIterator[str]:
    sim = await start_simulator(host="127.0.0.1", port=0, profile="renamed", seed=11)
    try:
        yield sim.url
    finally:
        await sim.close()


def queries(log: list[dict[str, str]], route: str) -> list[dict[str, list[str]]]:
    return [parse_qs(urlsplit(r["path"]).query) for r in log if urlsplit(r["path"]).path == route]


async def test_trigger_work_is_found_under_the_declared_names(api: Api) -> None:
    await set_jobs(
        api, pickup_s=0.05, duration_s=0.1, retry_delay_s=0.1, sequence=["failed", "success"]
    )
    tracking = await api.track(
        kind="trigger_work", trigger_binding_id="bind-order-audit", entity_id="ord-2"
    )
    for entity in ("ord-1", "ord-2", "ord-3"):
        status, body = await api.sim("PUT", f"{RECORDS}/Order/records/{entity}", {})
        assert status == 200, body
    final = await api.wait_terminal(tracking["tracking_id"])
    assert final["outcome"] == "succeeded", final
    [entry] = final["result"]["jobs"]
    assert entry["attempts"] == 2 and entry["run_status"] == "Success"
    status, job = await api.sim("GET", f"{OPS}/jobs/{entry['job_id']}")
    assert status == 200
    assert (job["TriggerBindingId"], job["EntityId"]) == ("bind-order-audit", "ord-2")
    status, log = await api.sim("GET", "/_sim/requests")
    assert status == 200
    listed = queries(log["requests"], f"{OPS}/jobs")
    assert listed and all(
        q["bindingId"] == ["bind-order-audit"] and q["recordId"] == ["ord-2"] and "createdFrom" in q
        and "pageSize" in q and not {"TriggerBindingId", "EntityId", "From", "Limit"} & set(q)
        for q in listed
    )  # fmt: skip
    runs = queries(log["requests"], f"{OPS}/runs")
    assert runs and all("businessFunctionId" in q and "startedFrom" in q for q in runs)
    text = await api.metrics_text()
    assert (
        'orchestrator_filter_names_fallback{route="function_jobs",workspace="default"} 0.0' in text
    )
    assert 'orchestrator_contract_anomalies_total{kind="trigger_work"' not in text


async def test_schedule_occurrences_use_the_declared_names(api: Api) -> None:
    status, body = await api.sim(
        "POST", "/_sim/schedules", {"FunctionKey": "adhoc.every-second", "Cron": "* * * * * *"}
    )
    assert status == 201, body
    await set_jobs(api, pickup_s=0.05, duration_s=0.1, sequence=["success"])
    tracking = await api.track(kind="schedule", remote_id=body["ScheduleId"], timeout_s=30)
    await wait_for(
        api,
        tracking["tracking_id"],
        lambda events: any(e["type"].endswith(".occurrence") for e in events),
    )
    status, log = await api.sim("GET", "/_sim/requests")
    listed = queries(log["requests"], f"{OPS}/jobs")
    assert listed and all(q["Filter.ScheduleId"] == [body["ScheduleId"]] for q in listed)
    assert all("ScheduleId" not in q and "jobSource" in q for q in listed)
    status, _ = await api.call("DELETE", f"/v1/trackings/{tracking['tracking_id']}")
    assert status == 200


async def test_a_filter_the_document_does_not_declare_is_a_422(api: Api) -> None:
    # This installation's lists have no search parameter: a correlation id cannot be matched.
    status, problem = await api.call(
        "POST",
        "/v1/trackings",
        json={
            "kind": "trigger_work",
            "trigger_binding_id": "bind-order-shipped",
            "filter_correlation_id": "corr-1",
        },
    )
    assert status == 422, problem
    assert problem["field"] == "filter_correlation_id"
    assert "declares no filter" in problem["detail"]
    status, batch = await api.call(
        "POST",
        "/v1/trackings/batch",
        json={
            "items": [
                {"kind": "trigger_work", "trigger_binding_id": "b", "filter_correlation_id": "c"}
            ]
        },
    )
    assert (
        status == 200 and batch["items"][0]["problem"]["field"] == "items.0.filter_correlation_id"
    )
