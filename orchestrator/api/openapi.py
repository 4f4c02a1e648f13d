"""This API's own OpenAPI 3.1 document, generated from the request/response models."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel

from orchestrator.api.models import (
    BatchBody,
    BatchOut,
    CancelOut,
    FollowUpsBody,
    FollowUpsOut,
    ForwardedProblem,
    IntakeBody,
    Problem,
    ReplayBody,
    TrackingOut,
    TrackingPage,
)
from orchestrator.store.groups import GROUP_STATES
from orchestrator.vocabulary import Kind, Outcome, TrackingState

_REF = "#/components/schemas/{model}"


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _problem(description: str, model: type[BaseModel] = Problem) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/problem+json": {"schema": _ref(model)}},
    }


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's schema and those it refers to, by name; request bodies as validated."""
    mode: Literal["validation", "serialization"] = "serialization"
    if model in (IntakeBody, FollowUpsBody, ReplayBody, BatchBody):
        mode = "validation"
    schema = model.model_json_schema(ref_template=_REF, mode=mode)
    return {**schema.pop("$defs", {}), model.__name__: schema}


def _forwarded(description: str) -> dict[str, Any]:
    return _problem(description, ForwardedProblem)


_ERRORS = {
    "400": _problem("The body is not valid JSON"),
    "401": _problem("Missing or wrong bearer token"),
    "413": _problem("Body too large"),
    "415": _problem("Body is not JSON"),
    "422": _problem("Invalid field or query parameter, or an unknown one (named in `field`)"),
    "503": _problem("Draining or store unavailable"),
}
# A request the service makes to the workspace for the caller, when it is not carried
# out (orchestrator.workspace.forwarded): a refusal as such, trouble as trouble.
_WORKSPACE_TROUBLE = {
    "502": _forwarded("Workspace error: no connection, its 5xx, 401/403, an unusable answer"),
    "503": _forwarded("Draining, store unavailable, or the workspace asked us to wait"),
    "504": _forwarded("The workspace did not answer in time"),
}
# W3C Trace Context of the request; malformed values are ignored, never refused.
_TRACE_HEADERS = [
    {
        "name": name,
        "in": "header",
        "required": False,
        "schema": {"type": "string"},
        "description": f"W3C {name}: stored with each tracking the request creates (a batch "
        "item's own traceparent and tracestate fields replace both) and carried to its events.",
    }
    for name in ("traceparent", "tracestate")
]


def _query(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema}


def _path(name: str, schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": name, "in": "path", "required": True, "schema": schema}]


_WAIT = {
    **_query("wait", {"type": "number", "minimum": 0, "maximum": 60}),
    "description": "Answer once it has ended, or after at most this many seconds "
    "with its state then (server-side wait; 0 or absent: at once).",
}
_GROUP_NAME = {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,200}$"}
_SEAL_BODY = {
    "type": "object",
    "additionalProperties": False,
    "maxProperties": 1,
    "properties": {
        "deadline_at": {"type": "string", "format": "date-time"},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 30 * 86400},
    },
}
_TRACKING_ID = _path("tracking_id", {"type": "string", "pattern": "^trk_[0-9a-f]{24}$"})


def _enum(vocabulary: type[StrEnum]) -> dict[str, Any]:
    return {"type": "string", "enum": [member.value for member in vocabulary]}


def _body(schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def _op(
    operation_id: str,
    answers: dict[str, Any],
    parameters: list[dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
    workspace: bool = False,
) -> dict[str, Any]:
    """An operation answering ``answers``, the usual errors, and with ``workspace``
    the troubles of a request made to the workspace for the caller."""
    op: dict[str, Any] = {"operationId": operation_id}
    if parameters:
        op["parameters"] = parameters
    if body is not None:
        op["requestBody"] = body
    op["responses"] = {**_ERRORS, **answers, **(_WORKSPACE_TROUBLE if workspace else {})}
    return op


def _unguarded(operation_id: str, responses: dict[str, Any]) -> dict[str, Any]:
    return {"operationId": operation_id, "security": [], "responses": responses}


_OBJECT = {"type": "object"}
_LIMIT = _query("limit", {"type": "integer", "minimum": 1, "maximum": 1000})
_CURSOR = _query("cursor", {"type": "string"})
_AFTER = _query("after", {"type": "integer", "minimum": 0})
_UNKNOWN = _problem("Unknown")
_FORWARDED_404 = _forwarded("Unknown tracking; or the workspace answered 404")
_STOP_RETRIES_BODY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "expected_modified_at": {
            "type": ["string", "null"],
            "format": "date-time",
            "maxLength": 64,
            "description": "The job's ModifiedAt (RFC 3339), "
            "sent as ExpectedModifiedAt; null or absent: read it",
        }
    },
}
_EVENTS_PAGE = {
    "type": "object",
    "properties": {
        "events": {
            "type": "array",
            "items": {"type": "object", "description": "A CloudEvents 1.0 JSON object with `seq`."},
        },
        "next_after": {"type": "integer"},
    },
}
_REPLAYED = {
    "type": "object",
    "required": ["replayed"],
    "properties": {"replayed": {"type": "integer", "minimum": 0}},
}


def build_openapi() -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    models: list[type[BaseModel]] = [IntakeBody, FollowUpsBody, TrackingOut, TrackingPage]
    models += [BatchOut, FollowUpsOut, Problem, ForwardedProblem, CancelOut, ReplayBody, BatchBody]
    for model in models:
        schemas.update(_schema(model))
    tracking = _ref(TrackingOut)
    paths: dict[str, Any] = {
        "/v1/trackings": {
            "post": _op(
                "createTracking",
                {"201": _json(tracking, "New tracking"), "200": _json(tracking, "Already tracked")},
                _TRACE_HEADERS,
                _body(_ref(IntakeBody)),
            ),
            "get": _op(
                "listTrackings",
                {"200": _json(_ref(TrackingPage), "A page")},
                [
                    _query("state", _enum(TrackingState)),
                    _query("kind", _enum(Kind)),
                    _query("outcome", _enum(Outcome)),
                    _query("workspace", {"type": "string"}),
                    _query("group", _GROUP_NAME),
                    _query("label", {"type": "string", "pattern": "^[^:]+:.*$"}),
                    _LIMIT,
                    _CURSOR,
                ],
            ),
        },
        "/v1/trackings/batch": {
            "post": _op(
                "createTrackingsBatch",
                {"200": _json(_ref(BatchOut), "Per-item answers")},
                _TRACE_HEADERS,
                _body(_ref(BatchBody)),
            )
        },
        "/v1/trackings/follow-ups": {
            "post": _op(
                "trackFollowUps",
                {"200": _json(_ref(FollowUpsOut), "Trackings")},
                _TRACE_HEADERS,
                _body(_ref(FollowUpsBody)),
            )
        },
        "/v1/trackings/{tracking_id}": {
            "parameters": _TRACKING_ID,
            "get": _op(
                "getTracking",
                {"200": _json(tracking, "The tracking"), "404": _UNKNOWN},
                [_WAIT],
            ),
            "delete": _op(
                "abandonTracking",
                {
                    "200": _json(tracking, "Abandoned"),
                    "404": _UNKNOWN,
                    "409": _problem("Already terminal"),
                },
            ),
        },
        "/v1/trackings/{tracking_id}/cancel": {
            "parameters": _TRACKING_ID,
            "post": _op(
                "cancelTracking",
                {
                    "202": _json(_ref(CancelOut), "Cancel accepted"),
                    "404": _FORWARDED_404,
                    "409": _forwarded(
                        "Not cancellable (`remote_status`), not a function job, terminal; "
                        "or the workspace refused it with 409"
                    ),
                    "422": _forwarded("A body other than {}; or the workspace's other 4xx"),
                },
                workspace=True,
            ),
        },
        "/v1/groups": {
            "get": _op(
                "listGroups",
                {"200": _json(_OBJECT, "A page of groups by name")},
                [_query("state", {"type": "string", "enum": list(GROUP_STATES)}), _LIMIT, _CURSOR],
            )
        },
        "/v1/groups/{group}": {
            "parameters": _path("group", _GROUP_NAME),
            "get": _op("getGroup", {"200": _json(_OBJECT, "The group"), "404": _UNKNOWN}, [_WAIT]),
        },
        "/v1/groups/{group}/seal": {
            "parameters": _path("group", _GROUP_NAME),
            "post": _op(
                "sealGroup",
                {"200": _json(_OBJECT, "Sealed (idempotent)"), "404": _UNKNOWN},
                _TRACE_HEADERS,
                _body(_SEAL_BODY, required=False),
            ),
        },
        "/v1/events": {
            "get": _op(
                "listEvents", {"200": _json(_EVENTS_PAGE, "Events in order")}, [_AFTER, _LIMIT]
            )
        },
        "/v1/events/stream": {
            "get": _op(
                "streamEvents",
                {
                    "200": {
                        "description": "Server-sent events",
                        "content": {"text/event-stream": {}},
                    }
                },
                [_AFTER],
            )
        },
        "/v1/deliveries": {
            "get": _op(
                "listDeliveries",
                {"200": _json(_OBJECT, "A page")},
                [
                    _query("state", {"type": "string", "enum": ["pending", "delivered", "dead"]}),
                    _LIMIT,
                    _CURSOR,
                ],
            )
        },
        "/v1/deliveries/replay": {
            "post": _op(
                "replayDeliveries",
                {"202": _json(_REPLAYED, "Queued again to the sink")},
                body=_body(_ref(ReplayBody)),
            ),
        },
        "/v1/sinks": {"get": _op("listSinks", {"200": _json(_OBJECT, "Each sink's state")})},
        "/v1/sinks/{name}/enable": {
            "parameters": _path("name", {"type": "string"}),
            "post": _op(
                "enableSink",
                {"200": _json(_OBJECT, "Enabled"), "404": _problem("Unknown sink")},
            ),
        },
        "/v1/deliveries/{delivery_id}/retry": {
            "parameters": _path("delivery_id", {"type": "integer", "minimum": 1}),
            "post": _op(
                "retryDelivery",
                {
                    "202": _json(_OBJECT, "Re-driven"),
                    "404": _UNKNOWN,
                    "409": _problem("Not dead"),
                },
            ),
        },
        "/v1/trackings/{tracking_id}/stop-retries": {
            "parameters": _TRACKING_ID,
            "post": _op(
                "stopRetries",
                {
                    "202": _json(_OBJECT, "Stop accepted (job.retry.stopRequested)"),
                    "200": _json(_OBJECT, "Already requested (idempotent)"),
                    "404": _FORWARDED_404,
                    "409": _forwarded(
                        "Stale version, CanStopRetries false, not a function job, terminal; "
                        "or the workspace refused it with 409"
                    ),
                    "422": _forwarded("A bad body (`field`); or the workspace's other 4xx"),
                },
                body=_body(_STOP_RETRIES_BODY, required=False),
                workspace=True,
            ),
        },
        "/v1/functions/{function_key}/execution-model": {
            "parameters": _path(
                "function_key", {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,200}$"}
            ),
            "get": _op(
                "getExecutionModel",
                {
                    "200": _json(_OBJECT, "The decision-table row and flags"),
                    "404": _problem("Unknown function key"),
                    "422": _problem("Bad function key, unknown workspace or query parameter"),
                },
                [_query("workspace", {"type": "string"})],
                workspace=True,
            ),
        },
        "/healthz": {
            "get": _unguarded(
                "healthz",
                {"200": {"description": "Alive"}, "422": _problem("Unknown query parameter")},
            )
        },
        "/readyz": {
            "get": _unguarded(
                "readyz",
                {
                    "200": {"description": "Ready"},
                    "503": {"description": "Not ready"},
                    "422": _problem("Unknown query parameter"),
                },
            )
        },
        "/metrics": {
            "get": {
                **_unguarded(
                    "metrics",
                    {
                        "200": {
                            "description": "Prometheus exposition",
                            "content": {"text/plain": {}},
                        },
                        "422": _problem("Unknown query parameter"),
                    },
                ),
                # prometheus-client's own filter: only the series of these names.
                "parameters": [_query("name[]", {"type": "array", "items": {"type": "string"}})],
            }
        },
        "/openapi.json": {
            "get": _unguarded(
                "openapi",
                {
                    "200": _json(_OBJECT, "This document"),
                    "422": _problem("Unknown query parameter"),
                },
            )
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "Moltaro polling orchestrator", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
