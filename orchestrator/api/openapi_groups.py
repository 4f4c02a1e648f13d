"""The ``/v1/groups`` routes in the OpenAPI document."""

from __future__ import annotations

from typing import Any

from orchestrator.api.openapi_parts import (
    _CURSOR,
    _LIMIT,
    _OBJECT,
    _TRACE_HEADERS,
    _UNKNOWN,
    _WAIT,
    _body,
    _json,
    _op,
    _path,
    _query,
)
from orchestrator.store.groups import GROUP_STATES

GROUP_NAME = {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,200}$"}
_SEAL_BODY = {
    "type": "object",
    "additionalProperties": False,
    "maxProperties": 1,
    "properties": {
        "deadline_at": {"type": "string", "format": "date-time"},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 30 * 86400},
    },
}


def group_paths() -> dict[str, Any]:
    return {
        "/v1/groups": {
            "get": _op(
                "listGroups",
                {"200": _json(_OBJECT, "A page of groups by name")},
                [_query("state", {"type": "string", "enum": list(GROUP_STATES)}), _LIMIT, _CURSOR],
            )
        },
        "/v1/groups/{group}": {
            "parameters": _path("group", GROUP_NAME),
            "get": _op("getGroup", {"200": _json(_OBJECT, "The group"), "404": _UNKNOWN}, [_WAIT]),
        },
        "/v1/groups/{group}/seal": {
            "parameters": _path("group", GROUP_NAME),
            "post": _op(
                "sealGroup",
                {"200": _json(_OBJECT, "Sealed (idempotent)"), "404": _UNKNOWN},
                _TRACE_HEADERS,
                _body(_SEAL_BODY, required=False),
            ),
        },
    }
