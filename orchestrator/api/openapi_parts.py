"""The parts the OpenAPI document is built of: schemas, parameters, answers."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel

from orchestrator.api.models import (
    BatchBody,
    FollowUpsBody,
    ForwardedProblem,
    IntakeBody,
    Problem,
    ReplayBody,
)

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
