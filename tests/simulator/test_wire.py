"""Wire variations and the OpenAPI document."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.simulator.conftest import JOBS, NET, call, enqueue, poll_until, set_job

ENUMS = {
    "FunctionJobStatus": ["Queued", "Leased", "Completed", "Failed", "Cancelled"],
    "FunctionRunStatus": ["Running", "Success", "Failed", "Skipped", "Cancelled", "TimedOut"],
    "NetOperationProjectBuildStatus": ["Queued", "Running", "Succeeded", "Failed", "Cancelled"],
    "WorkspaceUiBuildStatus": ["Queued", "Running", "Succeeded", "Failed", "Cancelled"],
    "NetOperationProjectBuildKind": ["Build", "Check"],
    "WorkspaceUiBuildKind": ["Check", "Build"],
    "BusinessFunctionContract": [
        "Validation", "BeforeSaveMutation", "Action", "Job", "TriggerHandler", "HttpEndpoint",
        "Command",
    ],
    "BusinessFunctionApiPublicationKind": ["Command", "Enqueue"],
    "BusinessFunctionBindingSource": ["EntitySave", "EntityTrigger"],
    "FunctionJobSource": ["Api", "Schedule", "Trigger", "Action", "Test", "FollowUp"],
}  # fmt: skip
STATUS_ROUTES = {
    "/api/workspace/functions/jobs/{jobId}": {"FunctionJobStatus", "FunctionRunStatus"},
    "/api/workspace/admin/net-operation-project/builds/{buildId}": {
        "NetOperationProjectBuildStatus",
        "NetOperationProjectBuildKind",
    },
    "/api/workspace/admin/ui-project/builds/{buildId}": {
        "WorkspaceUiBuildStatus",
        "WorkspaceUiBuildKind",
    },
}


def reachable(doc: dict[str, Any], schema: Any, seen: set[str] | None = None) -> set[str]:
    """Names of every component reachable from ``schema`` through $ref, allOf, items..."""
    seen = set() if seen is None else seen
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            if name not in seen:
                seen.add(name)
                reachable(doc, doc["components"]["schemas"][name], seen)
        for value in schema.values():
            reachable(doc, value, seen)
    elif isinstance(schema, list):
        for value in schema:
            reachable(doc, value, seen)
    return seen


async def test_openapi_enums_are_referenced_components(client: aiohttp.ClientSession) -> None:
    status, doc = await call(client, "GET", "/swagger/v1/swagger.json")
    assert status == 200 and doc["openapi"].startswith("3.")
    schemas = doc["components"]["schemas"]
    for name, names in ENUMS.items():
        assert schemas[name]["type"] == "integer"
        assert schemas[name]["x-enum-varnames"] == names
        assert len(schemas[name]["enum"]) == len(names)
    assert schemas["BusinessFunctionContract"]["enum"] == [0, 1, 2, 3, 5, 6, 7]
    everywhere: set[str] = set()
    for path, expected in STATUS_ROUTES.items():
        ok = doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]
        names = reachable(doc, ok["schema"])
        assert expected <= names, path
        assert "LegacyJobState" not in names
        everywhere |= names
    for path_item in doc["paths"].values():
        for op in path_item.values():
            everywhere |= reachable(doc, op)
    assert set(ENUMS) <= everywhere  # every enum is used by some route
    assert "LegacyJobState" in schemas  # the decoy exists...
    wrapped = [
        p for s in schemas.values() for p in s.get("properties", {}).values() if "allOf" in p
    ]
    assert wrapped and all("$ref" in w["allOf"][0] for w in wrapped)


async def test_camel_case_and_enums_as_names(client: aiohttp.ClientSession) -> None:
    await set_job(client, pickup_s=0, duration_s=0.05, outcomes={"success": 1})
    job = await enqueue(client)
    await poll_until(client, f"{JOBS}/{job['JobId']}", lambda b: b["Status"] == 2)
    status, body = await call(
        client, "PUT", "/_sim/settings", {"camel_case": True, "enums_as_names": True}
    )
    assert status == 200 and body["camel_case"] is True
    status, body = await call(client, "GET", f"{JOBS}/{job['JobId']}")
    assert body["jobId"] == job["JobId"] and body["status"] == "Completed"
    assert body["run"]["status"] == "Success" and body["run"]["resultSummary"]
    assert body["source"] == "Api" and "JobId" not in body
    status, answer = await call(client, "POST", "/api/workspace/functions/x.y/enqueue")
    assert answer["succeeded"] is True and answer["data"]["status"] == "Queued"
    status, build = await call(client, "POST", NET, {"Kind": "Check"})
    assert build["kind"] == "Check" and build["status"] == "Queued"
    status, rows = await call(client, "GET", "/api/workspace/admin/function-catalog")
    assert rows["items"][0]["currentPublishedContract"] == "Validation"
    await call(client, "PUT", "/_sim/settings", {"camel_case": False, "enums_as_names": False})
    status, body = await call(client, "GET", f"{JOBS}/{job['JobId']}")
    assert body["Status"] == 2 and body["Run"]["Status"] == 1
