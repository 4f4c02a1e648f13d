"""Administrative reads: filters and limits of jobs and runs, and the consistent sample configuration."""

from __future__ import annotations

import aiohttp

from tests.simulator.conftest import OPS, call, enqueue, set_job

ADMIN = "/api/workspace/admin"


async def test_job_and_run_filters(client: aiohttp.ClientSession) -> None:
    await set_job(client, pickup_s=5)
    a = await enqueue(client, "billing.sync-invoices")
    await enqueue(client, "reports.nightly-export")
    status, trig = await call(
        client,
        "POST",
        "/_sim/jobs",
        {
            "FunctionKey": "orders.on-shipped",
            "Source": "Trigger",
            "TriggerBindingId": "bind-order-shipped",
        },
    )
    assert status == 201 and trig["Source"] == 2
    _, page = await call(client, "GET", f"{OPS}/jobs")
    assert page["Total"] == 3 and page["Items"][0]["JobId"] == trig["JobId"]  # newest first
    _, page = await call(client, "GET", f"{OPS}/jobs?Limit=1")
    assert page["Total"] == 3 and len(page["Items"]) == 1
    _, page = await call(client, "GET", f"{OPS}/jobs?FunctionId=fn-billing-sync")
    assert [j["JobId"] for j in page["Items"]] == [a["JobId"]]
    _, page = await call(
        client, "GET", f"{OPS}/jobs?Source=Trigger&TriggerBindingId=bind-order-shipped"
    )
    assert [j["JobId"] for j in page["Items"]] == [trig["JobId"]]
    _, page = await call(client, "GET", f"{OPS}/jobs?Status=Queued&Source=0")
    assert page["Total"] == 2
    _, page = await call(client, "GET", f"{OPS}/jobs?Status=Completed")
    assert page["Total"] == 0
    _, page = await call(client, "GET", f"{OPS}/jobs?From=2100-01-01T00:00:00Z")
    assert page["Total"] == 0
    _, page = await call(client, "GET", f"{OPS}/jobs?To=2100-01-01T00:00:00Z&limit=2")
    assert page["Total"] == 3 and len(page["Items"]) == 2
    _, page = await call(client, "GET", f"{OPS}/runs?FunctionId=fn-billing-sync")
    assert page == {"Items": [], "Total": 0}  # still queued: no run yet
    for bad in (
        "Limit=0",
        "Limit=x",
        "Limit=5000",
        "Status=Exploded",
        "Source=9",
        "From=yesterday",
    ):
        status, body = await call(client, "GET", f"{OPS}/jobs?{bad}")
        assert status == 400, (bad, body)
        status, body = await call(client, "GET", f"{OPS}/runs?{bad}")
        assert status == 400, (bad, body)


async def test_sample_configuration_is_consistent(client: aiohttp.ClientSession) -> None:
    _, catalog = await call(client, "GET", f"{ADMIN}/function-catalog")
    _, bindings = await call(client, "GET", f"{ADMIN}/function-catalog/binding-summaries")
    _, publications = await call(client, "GET", f"{ADMIN}/api-functions")
    _, schedules = await call(client, "GET", f"{ADMIN}/function-schedules")
    by_id = {f["BusinessFunctionId"]: f for f in catalog["Items"]}
    assert catalog["Total"] == len(by_id)
    contracts = {f["CurrentPublishedContract"] for f in by_id.values()}
    assert contracts == {0, 1, 2, 3, 5, 6, 7}
    for row in bindings["Items"] + publications["Items"] + schedules["Items"]:
        assert row["BusinessFunctionId"] in by_id
    for row in publications["Items"]:
        assert row["FunctionKey"] == by_id[row["BusinessFunctionId"]]["FunctionKey"]
    sources = {
        (by_id[b["BusinessFunctionId"]]["CurrentPublishedContract"], b["Source"])
        for b in bindings["Items"]
    }
    assert {
        (0, 0),
        (1, 0),
        (5, 1),
    } <= sources  # Validation/BeforeSave in-save, trigger after commit
    kinds = {
        (by_id[p["BusinessFunctionId"]]["CurrentPublishedContract"], p["Kind"])
        for p in publications["Items"]
    }
    assert {(7, 0), (3, 1)} <= kinds  # Command publication, Job enqueue publication
    assert (7, 1) in kinds  # contradiction: an Enqueue publication on a non-Job contract
    assert any(p["IsRetired"] for p in publications["Items"])
    assert any(not p["IsEnabled"] for p in publications["Items"])
    targets = {
        by_id[s["BusinessFunctionId"]]["CurrentPublishedContract"] for s in schedules["Items"]
    }
    assert 3 in targets and targets - {3}  # contradiction: a schedule on a non-Job function
    status, one = await call(client, "GET", f"{ADMIN}/function-catalog/fn-billing-sync")
    assert status == 200 and one["FunctionKey"] == "billing.sync-invoices"
    assert (await call(client, "GET", f"{ADMIN}/function-catalog/fn-nope"))[0] == 404
    status, legacy = await call(client, "GET", f"{ADMIN}/legacy-imports")
    assert status == 200 and legacy["Total"] == 0
