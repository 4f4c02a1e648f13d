"""The workspace's OpenAPI 3 document (``GET /swagger/v1/swagger.json``).

Shaped like a Swashbuckle document: integer enums are components with
``x-enum-varnames``, referenced by ``$ref`` and sometimes wrapped in ``allOf``
(as generators do for nullable properties), plus a look-alike decoy enum that
no status route uses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from orchestrator.simulator.enums import ALL_ENUMS

_STR = {"type": "string", "nullable": True}
_TIME = {"type": "string", "format": "date-time", "nullable": True}
_INT = {"type": "integer", "format": "int32", "nullable": True}
_BOOL = {"type": "boolean"}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _wrapped(name: str) -> dict[str, Any]:
    return {"allOf": [_ref(name)], "nullable": True}


def _obj(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": props}


def _strs(*names: str) -> dict[str, Any]:
    """Nullable string properties, in order."""
    return dict.fromkeys(names, _STR)


def _times(*names: str) -> dict[str, Any]:
    """Nullable date-time properties, in order."""
    return dict.fromkeys(names, _TIME)


def _page(item: str) -> dict[str, Any]:
    return _obj({"Items": {"type": "array", "items": _ref(item)}, "Total": {"type": "integer"}})


def _schemas() -> dict[str, Any]:
    run = {
        **_strs("RunId", "JobId"),
        "Attempt": _INT,
        "Status": _wrapped("FunctionRunStatus"),
        **_times("StartedAt", "CompletedAt"),
        "DurationMs": {"type": "integer", "format": "int64", "nullable": True},
        "ResultSummary": _STR,
        "ResultData": {"nullable": True},
        "ErrorSummary": _STR,
    }
    # Where a job came from: on a job and on each of its runs' rows.
    origin = {
        "BusinessFunctionId": _STR,
        "Source": _wrapped("FunctionJobSource"),
        **_strs("ScheduleId", "TriggerBindingId", "ActionId", "EntityId"),
    }
    job = {
        "JobId": {"type": "string"},
        "FunctionKey": _STR,
        **origin,
        **_strs("CorrelationId", "DeduplicationKey"),
        "Status": _ref("FunctionJobStatus"),
        "CanCancel": _BOOL,
        "TimeoutSeconds": _INT,
        "CurrentAttempt": _INT,
        "EffectiveMaxAttempts": _INT,
        "RemainingAttempts": _INT,
        "RetryDelaySeconds": {"type": "number", "nullable": True},
        "NextRunAt": _TIME,
        "WillRetry": _BOOL,
        "CanStopRetries": _BOOL,
        **_strs("RetryStopState", "CancellationReasonCode"),
        "ReasonCodes": {"type": "array", "items": {"type": "string"}},
        **_times("CreatedAt", "ModifiedAt"),
        **_strs("LastError", "StatusUrl"),
        "Run": _wrapped("FunctionRun"),
    }
    failure = {
        "ReasonCode": {"type": "string"},
        "Category": _STR,
        "Retryable": _BOOL,
        **_strs("SqlState", "SafeTarget", "RemediationCode", "Summary"),
    }

    def build(status: str, kind: str, wrap_status: bool) -> dict[str, Any]:
        return _obj(
            {
                "Id": {"type": "string"},
                "Status": _wrapped(status) if wrap_status else _ref(status),
                "Kind": _wrapped(kind) if not wrap_status else _ref(kind),
                **_times("CreatedAt", "StartedAt", "CompletedAt", "ModifiedAt"),
                **_strs("ArtifactId", "ErrorSummary"),
                "Failure": _wrapped("BuildFailure"),
            }
        )

    schemas: dict[str, Any] = {e.schema: e.component() for e in ALL_ENUMS}
    schemas.update(
        FunctionRun=_obj(run),
        FunctionJobStatusModel=_obj(job),
        FunctionJobEnqueueResponse=_obj(
            {"Succeeded": _BOOL, "Data": _ref("FunctionJobStatusModel")}
        ),
        FunctionJobPage=_page("FunctionJobStatusModel"),
        FunctionRunRow=_obj({**run, **origin}),
        FunctionRunPage=_page("FunctionRunRow"),
        EntitySaveResponse=_obj(
            {
                "EntityName": {"type": "string"},
                "EntityId": {"type": "string"},
                "CorrelationId": {"type": "string"},
                "Saved": _BOOL,
                "ModifiedAt": _TIME,
            }
        ),
        ActionEnqueueRequest=_obj({"Input": {"nullable": True}, "CorrelationId": _STR}),
        StopRetriesRequest=_obj({"ExpectedModifiedAt": {"type": "string", "format": "date-time"}}),
        EnqueueRequest=_obj(
            {"Input": {"nullable": True}, "CorrelationId": _STR, "DeduplicationKey": _STR}
        ),
        BuildFailure=_obj(failure),
        NetOperationProjectBuild=build(
            "NetOperationProjectBuildStatus", "NetOperationProjectBuildKind", False
        ),
        WorkspaceUiBuild=build("WorkspaceUiBuildStatus", "WorkspaceUiBuildKind", True),
        NetOperationProjectBuildRequest=_obj({"Kind": _ref("NetOperationProjectBuildKind")}),
        WorkspaceUiBuildRequest=_obj({"Kind": _ref("WorkspaceUiBuildKind")}),
        FunctionCatalogEntry=_obj(
            {
                "BusinessFunctionId": {"type": "string"},
                **_strs("FunctionKey", "Name"),
                "Scope": {"type": "string", "enum": ["Global", "Entity"]},
                "CurrentPublishedContract": _wrapped("BusinessFunctionContract"),
                "Revision": _INT,
            }
        ),
        FunctionCatalogPage=_page("FunctionCatalogEntry"),
        BindingSummary=_obj(
            {
                "BindingId": {"type": "string"},
                "BusinessFunctionId": _STR,
                "Source": _ref("BusinessFunctionBindingSource"),
                "EntityName": _STR,
            }
        ),
        BindingSummaryPage=_page("BindingSummary"),
        ApiFunction=_obj(
            {
                **_strs("BusinessFunctionId", "FunctionKey"),
                "Kind": _ref("BusinessFunctionApiPublicationKind"),
                "IsEnabled": _BOOL,
                "IsRetired": _BOOL,
                "TimeoutSeconds": _INT,
            }
        ),
        ApiFunctionPage=_page("ApiFunction"),
        FunctionSchedule=_obj(
            {
                "ScheduleId": {"type": "string"},
                **_strs("BusinessFunctionId", "FunctionKey", "Cron", "TimeZone"),
                "Status": {"type": "string", "enum": ["Enabled", "Disabled"]},
                "NextRunAt": _TIME,
                **_strs("LastStatus", "TargetHealth", "ActiveJobId", "ActiveJobRetryStopState"),
            }
        ),
        FunctionSchedulePage=_page("FunctionSchedule"),
        LegacyImportRow=_obj({"ImportId": _STR, "State": _ref("LegacyJobState")}),
        LegacyImportPage=_page("LegacyImportRow"),
        ProblemDetails={
            "type": "object",
            "additionalProperties": True,
            "properties": {"type": _STR, "title": _STR, "status": _INT, "detail": _STR},
        },
    )
    return schemas


def _param(name: str, where: str = "path", schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "required": where == "path",
        "schema": schema or {"type": "string"},
    }


_DATE = {"type": "string", "format": "date-time"}
# The list routes' filters as the platform documentation names them, and their schemas.
FILTERS: tuple[tuple[str, dict[str, Any] | None], ...] = (
    ("FunctionId", None),
    ("Source", _ref("FunctionJobSource")),
    ("ScheduleId", None),
    ("TriggerBindingId", None),
    ("ActionId", None),
    ("EntityId", None),
    ("Search", None),
    ("Status", None),
    ("From", _DATE),
    ("To", _DATE),
    ("Limit", {"type": "integer", "minimum": 1, "maximum": 1000}),
)
Renames = Mapping[str, Mapping[str, str | None]]


def _filters(route: str, renames: Renames) -> list[dict[str, Any]]:
    """A list route's query parameters, under the names the installation gives them."""
    named = ((renames.get(route, {}).get(d, d), schema) for d, schema in FILTERS)
    return [_param(name, "query", schema) for name, schema in named if name is not None]


# The workspace's paths, shared with the routes that serve them (app.py).
WS = "/api/workspace"
FN = f"{WS}/functions"
ADMIN = f"{WS}/admin"
OPS = f"{ADMIN}/function-operations"
CATALOG = f"{ADMIN}/function-catalog"
SCHEDULES = f"{ADMIN}/function-schedules"
RECORD = f"{WS}/entities/{{entityName}}/records/{{entityId}}"
ACTION = "actions/{actionId}/enqueue"
_JOB = "FunctionJobStatusModel"
_ENQUEUED = "FunctionJobEnqueueResponse"
_CONFLICT = (400, 404, 409)


def build_document(renames: Renames | None = None) -> dict[str, Any]:
    """The document; ``renames`` (a profile's ``filter_names``) renames or drops filters."""
    names = renames or {}
    paths: dict[str, Any] = {}

    def add(
        method: str,
        path: str,
        op_id: str,
        ok: str,
        body: str | None = None,
        errors: tuple[int, ...] = (400, 404),
        filters: str | None = None,
    ) -> None:
        """One operation: a list's parameters are its ``filters``, any other's its path's."""
        if filters is not None:
            params = _filters(filters, names)
        else:
            params = [_param(name) for name in re.findall(r"{(\w+)}", path)]
        problem = {"application/problem+json": {"schema": _ref("ProblemDetails")}}
        responses: dict[str, Any] = {
            "200": {"description": "OK", "content": {"application/json": {"schema": _ref(ok)}}},
            **{str(code): {"description": "Problem", "content": problem} for code in errors},
        }
        op: dict[str, Any] = {"operationId": op_id, "parameters": params, "responses": responses}
        if body:
            op["requestBody"] = {"content": {"application/json": {"schema": _ref(body)}}}
        paths[path] = {method: op}

    add("put", RECORD, "SaveEntityRecord", "EntitySaveResponse", errors=(400,))
    add("post", f"{RECORD}/{ACTION}", "EnqueueEntityAction", _ENQUEUED, "ActionEnqueueRequest")
    add("post", f"{WS}/{ACTION}", "EnqueueGlobalAction", _ENQUEUED, "ActionEnqueueRequest")
    add(
        "post",
        f"{FN}/{{functionKey}}/enqueue",
        "EnqueueFunction",
        _ENQUEUED,
        "EnqueueRequest",
        _CONFLICT,
    )
    add("get", f"{FN}/jobs/{{jobId}}", "GetFunctionJob", _JOB)
    add("post", f"{FN}/jobs/{{jobId}}/cancel", "CancelFunctionJob", _JOB, errors=(404, 409))
    add("get", f"{OPS}/jobs", "ListFunctionJobs", "FunctionJobPage", filters="jobs")
    add("get", f"{OPS}/jobs/{{jobId}}", "GetFunctionOperationsJob", _JOB)
    add(
        "post",
        f"{OPS}/jobs/{{jobId}}/stop-retries",
        "StopFunctionJobRetries",
        _JOB,
        "StopRetriesRequest",
        _CONFLICT,
    )
    add("get", f"{OPS}/runs", "ListFunctionRuns", "FunctionRunPage", filters="runs")
    add("get", CATALOG, "ListFunctionCatalog", "FunctionCatalogPage")
    add("get", f"{CATALOG}/binding-summaries", "ListBindingSummaries", "BindingSummaryPage")
    add("get", f"{CATALOG}/{{functionId}}", "GetFunctionCatalogEntry", "FunctionCatalogEntry")
    add("get", f"{ADMIN}/api-functions", "ListApiFunctions", "ApiFunctionPage")
    add("get", SCHEDULES, "ListFunctionSchedules", "FunctionSchedulePage")
    add("get", f"{SCHEDULES}/{{scheduleId}}", "GetFunctionSchedule", "FunctionSchedule")
    add("get", f"{ADMIN}/legacy-imports", "ListLegacyImports", "LegacyImportPage")
    for project, model in (
        ("net-operation-project", "NetOperationProjectBuild"),
        ("ui-project", "WorkspaceUiBuild"),
    ):
        tag = model.removesuffix("Build")
        add("post", f"{ADMIN}/{project}/builds", f"Submit{tag}Build", model, f"{model}Request")
        add("get", f"{ADMIN}/{project}/builds/{{buildId}}", f"Get{tag}Build", model)
    return {
        "openapi": "3.0.1",
        "info": {"title": "Moltaro Workspace API (simulated)", "version": "v1"},
        "paths": paths,
        "components": {"schemas": _schemas()},
    }
