"""Enum resolution from an OpenAPI document built like the ones ASP.NET generators emit."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.errors import EnumResolutionError
from orchestrator.interpret import Phase, fallback_enums, interpret, resolve_enums

JOB_ROUTE = "/api/workspace/functions/jobs/{id}"
NET_ROUTE = "/api/workspace/admin/net-operation-project/builds/{id}"
UI_ROUTE = "/api/workspace/admin/ui-project/builds/{id}"

JOB_STATUS = {0: "Queued", 1: "Leased", 2: "Completed", 3: "Failed", 4: "Cancelled"}
RUN_STATUS = {0: "Running", 1: "Success", 2: "Failed", 3: "Skipped", 4: "Cancelled", 5: "TimedOut"}
BUILD_STATUS = {0: "Queued", 1: "Running", 2: "Succeeded", 3: "Failed", 4: "Cancelled"}
SOURCE = {0: "Api", 1: "Schedule", 2: "Trigger", 3: "Action", 4: "Test", 5: "FollowUp"}


def enum(table: dict[int, str]) -> dict[str, Any]:
    return {
        "type": "integer",
        "format": "int32",
        "enum": list(table),
        "x-enum-varnames": list(table.values()),
    }


def ref(name: str, root: str = "#/components/schemas/") -> dict[str, str]:
    return {"$ref": root + name}


def json_200(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "200": {
            "description": "OK",
            "content": {
                # A decoy first: only the JSON media type's schema counts.
                "text/plain": {"schema": ref("LegacyJob")},
                "application/json": {"schema": schema},
                "text/json": {"schema": schema},
            },
        },
        "404": {
            "description": "Not Found",
            "content": {"application/problem+json": {"schema": ref("ProblemDetails")}},
        },
    }


def get_op(schema: dict[str, Any], param: str) -> dict[str, Any]:
    return {
        "get": {
            "tags": ["Functions"],
            "parameters": [
                {"name": param, "in": "path", "required": True, "schema": {"type": "string"}}
            ],
            "responses": json_200(schema),
        }
    }


def openapi_document() -> dict[str, Any]:
    """The shape the simulator serves: allOf-wrapped refs, a nested Run, cycles and decoys."""
    schemas: dict[str, Any] = {
        "FunctionJobStatus": enum(JOB_STATUS),
        "FunctionRunStatus": enum(RUN_STATUS),
        "FunctionJobSource": enum(SOURCE),
        "NetOperationProjectBuildStatus": enum(BUILD_STATUS),
        "WorkspaceUiBuildStatus": enum(BUILD_STATUS),
        "NetOperationProjectBuildKind": enum({0: "Build", 1: "Check"}),
        "WorkspaceUiBuildKind": enum({0: "Check", 1: "Build"}),
        # Look-alikes no status route uses.
        "LegacyJobState": enum({0: "Completed", 1: "Queued", 2: "Failed", 7: "Leased"}),
        "LegacyBuildKind": enum({0: "Check", 1: "Build", 2: "Deploy"}),
        "LegacyJob": {
            "type": "object",
            "properties": {"Status": ref("LegacyJobState"), "Kind": ref("LegacyBuildKind")},
        },
        "ProblemDetails": {
            "type": "object",
            "properties": {"Status": {"type": "integer"}, "Title": {"type": "string"}},
        },
        "FunctionRunModel": {
            "type": "object",
            "properties": {
                "RunId": {"type": "string"},
                "Attempt": {"type": "integer"},
                "Status": {"allOf": [ref("FunctionRunStatus")]},
                "Source": ref("FunctionJobSource"),
                "ResultData": {"nullable": True},
                # A cycle back to the job model.
                "Job": {"allOf": [ref("FunctionJobStatusModel")], "nullable": True},
            },
            "additionalProperties": False,
        },
        "FunctionJobStatusModel": {
            "type": "object",
            "properties": {
                "JobId": {"type": "string"},
                "Status": {"allOf": [ref("FunctionJobStatus")]},
                "Source": ref("FunctionJobSource"),
                "CanCancel": {"type": "boolean"},
                "NextRunAt": {"type": "string", "format": "date-time", "nullable": True},
                "Run": {"allOf": [ref("FunctionRunModel")], "nullable": True},
                "Previous": ref("FunctionJobStatusModel"),  # a direct self-reference
                "Legacy": {"type": "array", "items": ref("LegacyJob")},
            },
            "additionalProperties": False,
        },
        "FunctionJobStatusModelEnvelope": {
            "type": "object",
            "properties": {"Succeeded": {"type": "boolean"}, "Data": ref("FunctionJobStatusModel")},
        },
        "NetOperationProjectBuildFailure": {
            "type": "object",
            "properties": {
                "ReasonCode": {"type": "string"},
                "SqlState": {"type": "string", "nullable": True},
            },
        },
        "NetOperationProjectBuildRecord": {
            "type": "object",
            "properties": {
                "Id": {"type": "string"},
                "Status": {"allOf": [ref("NetOperationProjectBuildStatus")]},
                "Kind": {"allOf": [ref("NetOperationProjectBuildKind")]},
                "Failure": {"allOf": [ref("NetOperationProjectBuildFailure")], "nullable": True},
            },
        },
        "WorkspaceUiBuildRecord": {
            "type": "object",
            "properties": {
                "Id": {"type": "string"},
                "Status": ref("WorkspaceUiBuildStatus"),
                "Kind": ref("WorkspaceUiBuildKind"),
                "ErrorSummary": {"type": "string", "nullable": True},
            },
        },
    }
    return {
        "openapi": "3.0.1",
        "info": {"title": "Moltaro Workspace API", "version": "v1"},
        "paths": {
            "/api/workspace/functions/{functionKey}/enqueue": {
                "post": {"responses": json_200(ref("FunctionJobStatusModelEnvelope"))}
            },
            "/api/workspace/functions/jobs/{jobId}/cancel": {
                "post": {"responses": json_200(ref("LegacyJob"))}
            },
            "/api/workspace/legacy/jobs/{jobId}": get_op(ref("LegacyJob"), "jobId"),
            "/api/workspace/functions/jobs/{jobId}": get_op(ref("FunctionJobStatusModel"), "jobId"),
            "/api/workspace/admin/net-operation-project/builds/{buildId}": get_op(
                ref("NetOperationProjectBuildRecord"), "buildId"
            ),
            "/api/workspace/admin/ui-project/builds/{buildId}": get_op(
                ref("WorkspaceUiBuildRecord"), "buildId"
            ),
        },
        "components": {"schemas": schemas},
    }


def swagger2_document() -> dict[str, Any]:
    """The same job route in Swagger 2 form: #/definitions refs, response.schema, basePath."""
    doc = openapi_document()
    definitions = copy.deepcopy(doc["components"]["schemas"])

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: (
                    v.replace("#/components/schemas/", "#/definitions/")
                    if k == "$ref"
                    else rewrite(v)
                )
                for k, v in node.items()
            }
        if isinstance(node, list):
            return [rewrite(v) for v in node]
        return node

    return {
        "swagger": "2.0",
        "basePath": "/api/workspace",
        "paths": {
            "/functions/jobs/{jobId}": {
                "get": {
                    "produces": ["application/json"],
                    "responses": {
                        "200": {
                            "description": "OK",
                            "schema": ref("FunctionJobStatusModel", "#/definitions/"),
                        }
                    },
                }
            }
        },
        "definitions": rewrite(definitions),
    }


# --- the job route -------------------------------------------------------------------------


def test_job_route_enums() -> None:
    enums = resolve_enums(openapi_document(), JOB_ROUTE)
    assert enums.source == "openapi"
    assert enums.values["status"] == JOB_STATUS
    assert enums.values["run.status"] == RUN_STATUS
    # One enum schema used at two paths is read at both.
    assert enums.values["source"] == SOURCE
    assert enums.values["run.source"] == SOURCE


def test_decoys_do_not_leak() -> None:
    enums = resolve_enums(openapi_document(), JOB_ROUTE)
    for values in enums.values.values():
        assert "Deploy" not in values.values()
        assert values.get(7) != "Leased"
    assert all(not path.startswith("legacy") for path in enums.values)


def test_cycles_terminate_and_are_walked_once_per_path() -> None:
    enums = resolve_enums(openapi_document(), JOB_ROUTE)
    # The self-reference and the Run -> Job back-reference are not expanded again.
    assert not any(path.startswith(("previous.", "run.job.")) for path in enums.values)


@pytest.mark.parametrize(
    ("route", "kind_names"),
    [(NET_ROUTE, {0: "Build", 1: "Check"}), (UI_ROUTE, {0: "Check", 1: "Build"})],
)
def test_build_routes(route: str, kind_names: dict[int, str]) -> None:
    enums = resolve_enums(openapi_document(), route)
    assert enums.values["status"] == BUILD_STATUS
    assert enums.values["kind"] == kind_names


def test_route_matches_any_parameter_name_and_trailing_slash() -> None:
    doc = openapi_document()
    doc["paths"]["/api/workspace/functions/jobs/{job_id}/"] = doc["paths"].pop(
        "/api/workspace/functions/jobs/{jobId}"
    )
    assert resolve_enums(doc, JOB_ROUTE).values["status"] == JOB_STATUS
    assert resolve_enums(doc, JOB_ROUTE + "/").values["status"] == JOB_STATUS


def test_literal_segments_must_match() -> None:
    doc = openapi_document()
    with pytest.raises(EnumResolutionError, match="no path matching"):
        resolve_enums(doc, "/api/workspace/functions/runs/{id}")
    with pytest.raises(EnumResolutionError):
        resolve_enums(doc, "/api/workspace/functions/jobs/latest")


def test_route_case_difference_is_the_second_choice() -> None:
    doc = openapi_document()
    doc["paths"]["/API/Workspace/Functions/Jobs/{jobId}"] = doc["paths"].pop(
        "/api/workspace/functions/jobs/{jobId}"
    )
    assert resolve_enums(doc, JOB_ROUTE).values["status"] == JOB_STATUS
    # An exact match wins over a case-folded one listed earlier.
    doc["paths"] = {
        "/API/workspace/functions/jobs/{x}": get_op(ref("LegacyJob"), "x"),
        **doc["paths"],
    }
    doc["paths"]["/api/workspace/functions/jobs/{x}"] = get_op(ref("FunctionJobStatusModel"), "x")
    assert resolve_enums(doc, JOB_ROUTE).values["status"] == JOB_STATUS


def test_servers_path_prefix() -> None:
    doc = openapi_document()
    doc["servers"] = [{"url": "https://workspace.example/api"}]
    doc["paths"] = {
        "/workspace/functions/jobs/{jobId}": doc["paths"]["/api/workspace/functions/jobs/{jobId}"]
    }
    assert resolve_enums(doc, JOB_ROUTE).values["status"] == JOB_STATUS


def test_data_envelope_is_stripped() -> None:
    doc = openapi_document()
    doc["paths"]["/api/workspace/functions/jobs/{jobId}"] = get_op(
        ref("FunctionJobStatusModelEnvelope"), "jobId"
    )
    enums = resolve_enums(doc, JOB_ROUTE)
    assert enums.values["status"] == JOB_STATUS
    assert enums.values["run.status"] == RUN_STATUS
    assert not any(path.startswith("data") for path in enums.values)


def test_inline_envelope_with_all_of_wrapped_data() -> None:
    doc = openapi_document()
    envelope = {
        "allOf": [
            {"type": "object", "properties": {"succeeded": {"type": "boolean"}}},
            {"type": "object", "properties": {"data": {"allOf": [ref("FunctionJobStatusModel")]}}},
        ]
    }
    doc["paths"]["/api/workspace/functions/jobs/{jobId}"] = get_op(envelope, "jobId")
    assert resolve_enums(doc, JOB_ROUTE).values["run.status"] == RUN_STATUS


def test_swagger2_definitions() -> None:
    enums = resolve_enums(swagger2_document(), JOB_ROUTE)
    assert enums.values["status"] == JOB_STATUS
    assert enums.values["run.status"] == RUN_STATUS


def test_one_of_any_of_and_nullable_wrappers() -> None:
    doc = openapi_document()
    schemas = doc["components"]["schemas"]
    props = schemas["FunctionJobStatusModel"]["properties"]
    props["Status"] = {"oneOf": [{"type": "null"}, ref("FunctionJobStatus")]}
    props["Run"] = {"anyOf": [ref("FunctionRunModel"), {"type": "null"}]}
    schemas["FunctionRunStatus"] = {
        **enum(RUN_STATUS),
        "enum": [*RUN_STATUS, None],
        "nullable": True,
    }
    enums = resolve_enums(doc, JOB_ROUTE)
    assert enums.values["status"] == JOB_STATUS
    assert enums.values["run.status"] == RUN_STATUS


def test_model_wrapped_in_all_of_and_ref_chain() -> None:
    doc = openapi_document()
    schemas = doc["components"]["schemas"]
    schemas["Alias"] = ref("FunctionJobStatusModel")
    schemas["JobStatusEnumAlias"] = ref("FunctionJobStatus")
    schemas["FunctionJobStatusModel"]["properties"]["Status"] = ref("JobStatusEnumAlias")
    doc["paths"]["/api/workspace/functions/jobs/{jobId}"] = get_op(
        {"allOf": [ref("Alias")]}, "jobId"
    )
    assert resolve_enums(doc, JOB_ROUTE).values["status"] == JOB_STATUS


def test_response_ref_and_other_json_media_types() -> None:
    doc = openapi_document()
    doc["components"]["responses"] = {
        "JobOk": {
            "description": "OK",
            "content": {
                "application/json; charset=utf-8": {"schema": ref("FunctionJobStatusModel")}
            },
        }
    }
    doc["paths"]["/api/workspace/functions/jobs/{jobId}"]["get"]["responses"] = {
        "200": ref("JobOk", "#/components/responses/")
    }
    assert resolve_enums(doc, JOB_ROUTE).values["status"] == JOB_STATUS
    doc["components"]["responses"]["JobOk"]["content"] = {
        "application/vnd.moltaro+json": {"schema": ref("FunctionJobStatusModel")}
    }
    assert resolve_enums(doc, JOB_ROUTE).values["status"] == JOB_STATUS


def test_x_enum_names_is_accepted_too() -> None:
    doc = openapi_document()
    schemas = doc["components"]["schemas"]
    schemas["FunctionJobStatus"] = {
        "type": "integer",
        "enum": list(JOB_STATUS),
        "x-enumNames": list(JOB_STATUS.values()),
    }
    assert resolve_enums(doc, JOB_ROUTE).values["status"] == JOB_STATUS


def test_renumbered_installation_is_believed() -> None:
    doc = openapi_document()
    doc["components"]["schemas"]["FunctionJobStatus"] = enum(
        {10: "Queued", 11: "Leased", 12: "Completed"}
    )
    enums = resolve_enums(doc, JOB_ROUTE)
    assert interpret("function_job", {"Status": 11}, enums).remote_status == "Leased"
    assert interpret("function_job", {"Status": 1}, enums).anomaly == "unknown_status"


def test_pointer_escapes() -> None:
    doc = openapi_document()
    doc["components"]["schemas"]["Job/Status~v2"] = enum(JOB_STATUS)
    doc["components"]["schemas"]["FunctionJobStatusModel"]["properties"]["Status"] = ref(
        "Job~1Status~0v2"
    )
    assert resolve_enums(doc, JOB_ROUTE).values["status"] == JOB_STATUS


# --- failures ---------------------------------------------------------------------------------


def broken(mutate: Any) -> dict[str, Any]:
    doc = openapi_document()
    mutate(doc)
    return doc


JOB_PATH = "/api/workspace/functions/jobs/{jobId}"


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        (None, "not a JSON object"),
        ([], "not a JSON object"),
        ({}, "no paths"),
        ({"paths": []}, "no paths"),
        (
            broken(lambda d: d["paths"].pop(JOB_PATH)),
            "no path matching /api/workspace/functions/jobs/{id}",
        ),
        (broken(lambda d: d["paths"][JOB_PATH].pop("get")), "no GET operation"),
        (broken(lambda d: d["paths"].__setitem__(JOB_PATH, None)), "no GET operation"),
        (
            broken(lambda d: d["paths"][JOB_PATH]["get"]["responses"].pop("200")),
            "no 200 response schema",
        ),
        (broken(lambda d: d["paths"][JOB_PATH]["get"].pop("responses")), "no 200 response schema"),
        (
            broken(lambda d: d["paths"][JOB_PATH]["get"]["responses"]["200"].pop("content")),
            "no 200 response schema",
        ),
        (
            broken(
                lambda d: d["components"]["schemas"]["FunctionJobStatus"].pop("x-enum-varnames")
            ),
            "no enum with x-enum-varnames for Status",
        ),
        (
            broken(lambda d: d["components"]["schemas"].pop("FunctionJobStatus")),
            "no enum with x-enum-varnames for Status",
        ),
        (
            broken(
                lambda d: d["components"]["schemas"]["FunctionJobStatus"].update(
                    enum=["Queued", "Leased"]
                )
            ),
            "for Status",
        ),
        (
            broken(lambda d: d["components"]["schemas"]["FunctionJobStatus"].update(enum=[0, 1])),
            "for Status",
        ),
        (
            broken(
                lambda d: d["paths"][JOB_PATH]["get"].update(
                    responses=json_200(ref("External", "other.json#/"))
                )
            ),
            "for Status",
        ),
    ],
)
def test_resolution_errors(doc: Any, match: str) -> None:
    with pytest.raises(EnumResolutionError, match=match):
        resolve_enums(doc, JOB_ROUTE)


def test_route_served_only_by_a_decoy_schema_fails() -> None:
    # The route exists, but its schema has no status enum: a decoy elsewhere must not fill in.
    doc = broken(
        lambda d: d["components"]["schemas"]["FunctionJobStatusModel"]["properties"].pop("Status")
    )
    with pytest.raises(EnumResolutionError):
        resolve_enums(doc, JOB_ROUTE)


@pytest.mark.parametrize(
    "schemas",
    [
        {"A": ref("A")},
        {"A": ref("B"), "B": ref("A")},
        {"A": {"allOf": [ref("A")]}},
        {
            "A": {"properties": {"Child": ref("A"), "Other": {"oneOf": [ref("B")]}}},
            "B": {"anyOf": [ref("A")]},
        },
    ],
)
def test_ref_cycles_raise_cleanly(schemas: dict[str, Any]) -> None:
    doc = {"paths": {JOB_PATH: get_op(ref("A"), "jobId")}, "components": {"schemas": schemas}}
    with pytest.raises(EnumResolutionError, match="for Status"):
        resolve_enums(doc, JOB_ROUTE)


def test_exponential_schema_is_bounded() -> None:
    # 30 levels each referencing the next twice: 2**30 paths if walked naively.
    schemas: dict[str, Any] = {"L30": {"properties": {"Status": ref("S")}}, "S": enum(JOB_STATUS)}
    for level in range(30):
        nxt = ref(f"L{level + 1}")
        schemas[f"L{level}"] = {"properties": {"Status": ref("S"), "A": nxt, "B": nxt}}
    doc = {"paths": {JOB_PATH: get_op(ref("L0"), "jobId")}, "components": {"schemas": schemas}}
    assert resolve_enums(doc, JOB_ROUTE).values["status"] == JOB_STATUS


# --- fallback --------------------------------------------------------------------------------


def test_fallback_values() -> None:
    job = fallback_enums("function_job")
    assert job.source == "fallback"
    assert dict(job.values) == {"status": JOB_STATUS}
    assert "run.status" not in job.values  # not printed in the platform documentation
    net = fallback_enums("net_operation_build")
    assert dict(net.values) == {"status": BUILD_STATUS, "kind": {0: "Build", 1: "Check"}}
    ui = fallback_enums("workspace_ui_build")
    assert dict(ui.values) == {"status": BUILD_STATUS, "kind": {0: "Check", 1: "Build"}}


def test_fallback_is_a_fresh_copy() -> None:
    first = fallback_enums("function_job")
    first.values["status"][9] = "Bogus"  # type: ignore[index]
    assert 9 not in fallback_enums("function_job").values["status"]


def test_fallback_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown kind"):
        fallback_enums("batch_job")


def test_document_map_resolves_integer_run_status_and_fallback_does_not() -> None:
    body = {
        "Status": 2,
        "Run": {
            "Status": 1,
            "CompletedAt": "2026-11-29T19:30:02Z",
            "DurationMs": 5,
            "ResultSummary": "ok",
        },
    }
    assert (
        interpret("function_job", body, resolve_enums(openapi_document(), JOB_ROUTE)).phase
        is Phase.SUCCEEDED
    )
    verdict = interpret("function_job", body, fallback_enums("function_job"))
    assert (verdict.phase, verdict.anomaly) == (Phase.ANOMALY, "run_status_unresolved")


# --- arbitrary documents ------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=30,
)
schema_keys = st.sampled_from(
    [
        "$ref",
        "allOf",
        "oneOf",
        "anyOf",
        "properties",
        "Status",
        "status",
        "enum",
        "x-enum-varnames",
        "Run",
        "Data",
    ]
)
refs = st.sampled_from(
    ["#/components/schemas/A", "#/components/schemas/B", "#/definitions/A", "#/", "#/paths"]
)
schemas = st.recursive(
    st.dictionaries(schema_keys, json_values | refs, max_size=3),
    lambda inner: st.dictionaries(
        schema_keys, inner | st.lists(inner, max_size=3) | refs, max_size=4
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(a=schemas, b=schemas, root=schemas | json_values)
def test_arbitrary_documents_raise_only_enum_resolution_error(a: Any, b: Any, root: Any) -> None:
    doc = {
        "paths": {
            JOB_PATH: {
                "get": {"responses": {"200": {"content": {"application/json": {"schema": root}}}}}
            }
        },
        "components": {"schemas": {"A": a, "B": b}},
        "definitions": {"A": b},
    }
    try:
        enums = resolve_enums(doc, JOB_ROUTE)
    except EnumResolutionError:
        return
    assert "status" in enums.values
    for path, values in enums.values.items():
        assert path == path.lower()
        assert all(isinstance(k, int) and isinstance(v, str) and v for k, v in values.items())
