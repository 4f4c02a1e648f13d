"""This API's own OpenAPI 3.1 document, generated from the request/response models."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from orchestrator.api.models import (
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


def _forwarded(description: str) -> dict[str, Any]:
    return _problem(description, ForwardedProblem)


_ERRORS = {
    "400": _problem("Malformed request"),
    "401": _problem("Missing or wrong bearer token"),
    "413": _problem("Body too large"),
    "415": _problem("Body is not JSON"),
    "422": _problem("Invalid field (named in `field`)"),
    "503": _problem("Draining or store unavailable"),
}
# A request the service makes to the workspace for the caller, when it is not carried
# out (orchestrator.workspace.forwarded): a refusal as such, trouble as trouble.
_WORKSPACE_TROUBLE = {
    "502": _forwarded("Workspace error: no connection, its 5xx, 401/403, an unusable answer"),
    "503": _forwarded("Draining, store unavailable, or the workspace asked us to wait"),
    "504": _forwarded("The workspace did not answer in time"),
}
_TRACKING_ID = {
    "name": "tracking_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^trk_[0-9a-f]{24}$"},
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


def _enum(vocabulary: type[StrEnum]) -> dict[str, Any]:
    return {"type": "string", "enum": [member.value for member in vocabulary]}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def build_openapi() -> dict[str, Any]:
    models: list[type[BaseModel]] = [
        IntakeBody,
        FollowUpsBody,
        TrackingOut,
        TrackingPage,
        BatchOut,
        FollowUpsOut,
        Problem,
        ForwardedProblem,
        CancelOut,
        ReplayBody,
    ]
    schemas: dict[str, Any] = {}
    for model in models:
        if model in (IntakeBody, FollowUpsBody, ReplayBody):
            schema = model.model_json_schema(ref_template=_REF, mode="validation")
        else:
            schema = model.model_json_schema(ref_template=_REF, mode="serialization")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    schemas["BatchBody"] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["items"],
        "properties": {
            "items": {"type": "array", "minItems": 1, "maxItems": 1000, "items": _ref(IntakeBody)}
        },
    }
    event = {"type": "object", "description": "A CloudEvents 1.0 JSON object with `seq`."}
    paths: dict[str, Any] = {
        "/v1/trackings": {
            "post": {
                "operationId": "createTracking",
                "parameters": _TRACE_HEADERS,
                "requestBody": _body(_ref(IntakeBody)),
                "responses": {
                    "201": _json(_ref(TrackingOut), "New tracking"),
                    "200": _json(_ref(TrackingOut), "Already tracked"),
                    **_ERRORS,
                },
            },
            "get": {
                "operationId": "listTrackings",
                "parameters": [
                    _query("state", _enum(TrackingState)),
                    _query("kind", _enum(Kind)),
                    _query("outcome", _enum(Outcome)),
                    _query("workspace", {"type": "string"}),
                    _query("label", {"type": "string", "pattern": "^[^:]+:.*$"}),
                    _query("limit", {"type": "integer", "minimum": 1, "maximum": 1000}),
                    _query("cursor", {"type": "string"}),
                ],
                "responses": {"200": _json(_ref(TrackingPage), "A page"), **_ERRORS},
            },
        },
        "/v1/trackings/batch": {
            "post": {
                "operationId": "createTrackingsBatch",
                "parameters": _TRACE_HEADERS,
                "requestBody": _body({"$ref": "#/components/schemas/BatchBody"}),
                "responses": {"200": _json(_ref(BatchOut), "Per-item answers"), **_ERRORS},
            }
        },
        "/v1/trackings/follow-ups": {
            "post": {
                "operationId": "trackFollowUps",
                "parameters": _TRACE_HEADERS,
                "requestBody": _body(_ref(FollowUpsBody)),
                "responses": {"200": _json(_ref(FollowUpsOut), "Trackings"), **_ERRORS},
            }
        },
        "/v1/trackings/{tracking_id}": {
            "parameters": [_TRACKING_ID],
            "get": {
                "operationId": "getTracking",
                "responses": {
                    "200": _json(_ref(TrackingOut), "The tracking"),
                    "404": _problem("Unknown"),
                    **_ERRORS,
                },
            },
            "delete": {
                "operationId": "abandonTracking",
                "responses": {
                    "200": _json(_ref(TrackingOut), "Abandoned"),
                    "404": _problem("Unknown"),
                    "409": _problem("Already terminal"),
                    **_ERRORS,
                },
            },
        },
        "/v1/trackings/{tracking_id}/cancel": {
            "parameters": [_TRACKING_ID],
            "post": {
                "operationId": "cancelTracking",
                "responses": {
                    "202": _json(_ref(CancelOut), "Cancel accepted"),
                    **_ERRORS,
                    "404": _forwarded("Unknown tracking; or the workspace answered 404"),
                    "409": _forwarded(
                        "Not cancellable (`remote_status`), not a function job, terminal; "
                        "or the workspace refused it with 409"
                    ),
                    "422": _forwarded("A body other than {}; or the workspace's other 4xx"),
                    **_WORKSPACE_TROUBLE,
                },
            },
        },
        "/v1/events": {
            "get": {
                "operationId": "listEvents",
                "parameters": [
                    _query("after", {"type": "integer", "minimum": 0}),
                    _query("limit", {"type": "integer", "minimum": 1, "maximum": 1000}),
                ],
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "events": {"type": "array", "items": event},
                                "next_after": {"type": "integer"},
                            },
                        },
                        "Events in order",
                    ),
                    **_ERRORS,
                },
            }
        },
        "/v1/events/stream": {
            "get": {
                "operationId": "streamEvents",
                "parameters": [_query("after", {"type": "integer", "minimum": 0})],
                "responses": {
                    "200": {
                        "description": "Server-sent events",
                        "content": {"text/event-stream": {}},
                    },
                    **_ERRORS,
                },
            }
        },
        "/v1/deliveries": {
            "get": {
                "operationId": "listDeliveries",
                "parameters": [
                    _query("state", {"type": "string", "enum": ["pending", "delivered", "dead"]}),
                    _query("limit", {"type": "integer", "minimum": 1, "maximum": 1000}),
                    _query("cursor", {"type": "string"}),
                ],
                "responses": {"200": _json({"type": "object"}, "A page"), **_ERRORS},
            }
        },
        "/v1/deliveries/replay": {
            "post": {
                "operationId": "replayDeliveries",
                "requestBody": _body(_ref(ReplayBody)),
                "responses": {
                    "202": _json(
                        {
                            "type": "object",
                            "required": ["replayed"],
                            "properties": {"replayed": {"type": "integer", "minimum": 0}},
                        },
                        "Queued again to the sink",
                    ),
                    **_ERRORS,
                },
            },
        },
        "/v1/sinks": {
            "get": {
                "operationId": "listSinks",
                "responses": {"200": _json({"type": "object"}, "Each sink's state"), **_ERRORS},
            }
        },
        "/v1/sinks/{name}/enable": {
            "parameters": [
                {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
            ],
            "post": {
                "operationId": "enableSink",
                "responses": {
                    "200": _json({"type": "object"}, "Enabled"),
                    "404": _problem("Unknown sink"),
                    **_ERRORS,
                },
            },
        },
        "/v1/deliveries/{delivery_id}/retry": {
            "parameters": [
                {
                    "name": "delivery_id",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "integer", "minimum": 1},
                }
            ],
            "post": {
                "operationId": "retryDelivery",
                "responses": {
                    "202": _json({"type": "object"}, "Re-driven"),
                    "404": _problem("Unknown"),
                    "409": _problem("Not dead"),
                    **_ERRORS,
                },
            },
        },
        "/v1/trackings/{tracking_id}/stop-retries": {
            "parameters": [_TRACKING_ID],
            "post": {
                "operationId": "stopRetries",
                "requestBody": {
                    "required": False,
                    "content": {
                        "application/json": {
                            "schema": {
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
                        }
                    },
                },
                "responses": {
                    "202": _json({"type": "object"}, "Stop accepted (job.retry.stopRequested)"),
                    "200": _json({"type": "object"}, "Already requested (idempotent)"),
                    **_ERRORS,
                    "404": _forwarded("Unknown tracking; or the workspace answered 404"),
                    "409": _forwarded(
                        "Stale version, CanStopRetries false, not a function job, terminal; "
                        "or the workspace refused it with 409"
                    ),
                    "422": _forwarded("A bad body (`field`); or the workspace's other 4xx"),
                    **_WORKSPACE_TROUBLE,
                },
            },
        },
        "/v1/functions/{function_key}/execution-model": {
            "parameters": [
                {
                    "name": "function_key",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,200}$"},
                }
            ],
            "get": {
                "operationId": "getExecutionModel",
                "parameters": [_query("workspace", {"type": "string"})],
                "responses": {
                    "200": _json({"type": "object"}, "The decision-table row and flags"),
                    "404": _problem("Unknown function key"),
                    **_ERRORS,
                    "422": _problem("Bad function key, unknown workspace or query parameter"),
                    **_WORKSPACE_TROUBLE,
                },
            },
        },
        "/healthz": {
            "get": {
                "operationId": "healthz",
                "security": [],
                "responses": {"200": {"description": "Alive"}},
            }
        },
        "/readyz": {
            "get": {
                "operationId": "readyz",
                "security": [],
                "responses": {"200": {"description": "Ready"}, "503": {"description": "Not ready"}},
            }
        },
        "/metrics": {
            "get": {
                "operationId": "metrics",
                "security": [],
                "responses": {
                    "200": {"description": "Prometheus exposition", "content": {"text/plain": {}}}
                },
            }
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
