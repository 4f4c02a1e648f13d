"""The workspace's OpenAPI 3 document (``GET /swagger/v1/swagger.json``).

Shaped like a Swashbuckle document: integer enums are components with
``x-enum-varnames``, referenced by ``$ref`` and sometimes wrapped in ``allOf``
(as generators do for nullable properties), plus a look-alike decoy enum that
no status route uses.
"""

from __future__ import annotations

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


def _page(item: str) -> dict[str, Any]:
    return _obj({"Items": {"type": "array", "items": _ref(item)}, "Total": {"type": "integer"}})


def _schemas() -> dict[str, Any]:
    run = {
        "RunId": _STR,
        "JobId": _STR,
        "Attempt": _INT,
        "Status": _wrapped("FunctionRunStatus"),
        "StartedAt": _TIME,
        "CompletedAt": _TIME,
        "DurationMs": {"type": "integer", "format": "int64", "nullable": True},
        "ResultSummary": _STR,
        "ResultData": {"nullable": True},
        "ErrorSummary": _STR,
    }
    job = {
        "JobId": {"type": "string"},
        "FunctionKey": _STR,
        "BusinessFunctionId": _STR,
        "Source": _wrapped("FunctionJobSource"),
        "ScheduleId": _STR,
        "TriggerBindingId": _STR,
        "ActionId": _STR,
        "EntityId": _STR,
        "CorrelationId": _STR,
        "DeduplicationKey": _STR,
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
        "RetryStopState": _STR,
        "CancellationReasonCode": _STR,
        "ReasonCodes": {"type": "array", "items": {"type": "string"}},
        "CreatedAt": _TIME,
        "ModifiedAt": _TIME,
        "LastError": _STR,
        "StatusUrl": _STR,
        "Run": _wrapped("FunctionRun"),
    }
    failure = {
        "ReasonCode": {"type": "string"},
        "Category": _STR,
        "Retryable": _BOOL,
        "SqlState": _STR,
        "SafeTarget": _STR,
        "RemediationCode": _STR,
        "Summary": _STR,
    }

    def build(status: str, kind: str, wrap_status: bool) -> dict[str, Any]:
        return _obj(
            {
                "Id": {"type": "string"},
                "Status": _wrapped(status) if wrap_status else _ref(status),
                "Kind": _wrapped(kind) if not wrap_status else _ref(kind),
                "CreatedAt": _TIME,
                "StartedAt": _TIME,
                "CompletedAt": _TIME,
                "ModifiedAt": _TIME,
                "ArtifactId": _STR,
                "ErrorSummary": _STR,
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
        FunctionRunRow=_obj(
            {
                **run,
                "BusinessFunctionId": _STR,
                "Source": _wrapped("FunctionJobSource"),
                "ScheduleId": _STR,
                "TriggerBindingId": _STR,
                "ActionId": _STR,
                "EntityId": _STR,
            }
        ),
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
                "FunctionKey": _STR,
                "Name": _STR,
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
                "BusinessFunctionId": _STR,
                "FunctionKey": _STR,
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
                "BusinessFunctionId": _STR,
                "FunctionKey": _STR,
                "Cron": _STR,
                "TimeZone": _STR,
                "Status": {"type": "string", "enum": ["Enabled", "Disabled"]},
                "NextRunAt": _TIME,
                "LastStatus": _STR,
                "TargetHealth": _STR,
                "ActiveJobId": _STR,
                "ActiveJobRetryStopState": _STR,
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


def _op(
    op_id: str,
    ok: str,
    params: list[dict[str, Any]],
    body: str | None = None,
    errors: tuple[int, ...] = (400, 404),
) -> dict[str, Any]:
    responses: dict[str, Any] = {
        "200": {"description": "OK", "content": {"application/json": {"schema": _ref(ok)}}}
    }
    for code in errors:
        responses[str(code)] = {
            "description": "Problem",
            "content": {"application/problem+json": {"schema": _ref("ProblemDetails")}},
        }
    op: dict[str, Any] = {"operationId": op_id, "parameters": params, "responses": responses}
    if body:
        op["requestBody"] = {"content": {"application/json": {"schema": _ref(body)}}}
    return op


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
    out = []
    for documented, schema in FILTERS:
        name = renames.get(route, {}).get(documented, documented)
        if name is not None:
            out.append(_param(name, "query", schema))
    return out


def build_document(renames: Renames | None = None) -> dict[str, Any]:
    """The document; ``renames`` (a profile's ``filter_names``) renames or drops filters."""
    admin = "/api/workspace/admin"
    names = renames or {}
    record = "/api/workspace/entities/{entityName}/records/{entityId}"
    paths: dict[str, Any] = {
        record: {
            "put": _op(
                "SaveEntityRecord",
                "EntitySaveResponse",
                [_param("entityName"), _param("entityId")],
                errors=(400,),
            )
        },
        f"{record}/actions/{{actionId}}/enqueue": {
            "post": _op(
                "EnqueueEntityAction",
                "FunctionJobEnqueueResponse",
                [_param("entityName"), _param("entityId"), _param("actionId")],
                "ActionEnqueueRequest",
                (400, 404),
            )
        },
        "/api/workspace/actions/{actionId}/enqueue": {
            "post": _op(
                "EnqueueGlobalAction",
                "FunctionJobEnqueueResponse",
                [_param("actionId")],
                "ActionEnqueueRequest",
                (400, 404),
            )
        },
        "/api/workspace/functions/{functionKey}/enqueue": {
            "post": _op(
                "EnqueueFunction",
                "FunctionJobEnqueueResponse",
                [_param("functionKey")],
                "EnqueueRequest",
                (400, 404, 409),
            )
        },
        "/api/workspace/functions/jobs/{jobId}": {
            "get": _op("GetFunctionJob", "FunctionJobStatusModel", [_param("jobId")])
        },
        "/api/workspace/functions/jobs/{jobId}/cancel": {
            "post": _op(
                "CancelFunctionJob", "FunctionJobStatusModel", [_param("jobId")], errors=(404, 409)
            )
        },
        f"{admin}/function-operations/jobs": {
            "get": _op("ListFunctionJobs", "FunctionJobPage", _filters("jobs", names))
        },
        f"{admin}/function-operations/jobs/{{jobId}}": {
            "get": _op("GetFunctionOperationsJob", "FunctionJobStatusModel", [_param("jobId")])
        },
        f"{admin}/function-operations/jobs/{{jobId}}/stop-retries": {
            "post": _op(
                "StopFunctionJobRetries",
                "FunctionJobStatusModel",
                [_param("jobId")],
                "StopRetriesRequest",
                (400, 404, 409),
            )
        },
        f"{admin}/function-operations/runs": {
            "get": _op("ListFunctionRuns", "FunctionRunPage", _filters("runs", names))
        },
        f"{admin}/function-catalog": {"get": _op("ListFunctionCatalog", "FunctionCatalogPage", [])},
        f"{admin}/function-catalog/binding-summaries": {
            "get": _op("ListBindingSummaries", "BindingSummaryPage", [])
        },
        f"{admin}/function-catalog/{{functionId}}": {
            "get": _op("GetFunctionCatalogEntry", "FunctionCatalogEntry", [_param("functionId")])
        },
        f"{admin}/api-functions": {"get": _op("ListApiFunctions", "ApiFunctionPage", [])},
        f"{admin}/function-schedules": {
            "get": _op("ListFunctionSchedules", "FunctionSchedulePage", [])
        },
        f"{admin}/function-schedules/{{scheduleId}}": {
            "get": _op("GetFunctionSchedule", "FunctionSchedule", [_param("scheduleId")])
        },
        f"{admin}/legacy-imports": {"get": _op("ListLegacyImports", "LegacyImportPage", [])},
    }
    for project, model, request in (
        ("net-operation-project", "NetOperationProjectBuild", "NetOperationProjectBuildRequest"),
        ("ui-project", "WorkspaceUiBuild", "WorkspaceUiBuildRequest"),
    ):
        tag = model.removesuffix("Build")
        paths[f"{admin}/{project}/builds"] = {"post": _op(f"Submit{tag}Build", model, [], request)}
        paths[f"{admin}/{project}/builds/{{buildId}}"] = {
            "get": _op(f"Get{tag}Build", model, [_param("buildId")])
        }
    return {
        "openapi": "3.0.1",
        "info": {"title": "Moltaro Workspace API (simulated)", "version": "v1"},
        "paths": paths,
        "components": {"schemas": _schemas()},
    }
