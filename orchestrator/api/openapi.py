"""This API's own OpenAPI 3.1 document, generated from the request/response models."""

from __future__ import annotations

from typing import Any

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
from orchestrator.api.openapi_groups import GROUP_NAME, group_paths
from orchestrator.api.openapi_parts import (
    _AFTER,
    _CURSOR,
    _EVENTS_PAGE,
    _FORWARDED_404,
    _LIMIT,
    _OBJECT,
    _REPLAYED,
    _STOP_RETRIES_BODY,
    _TRACE_HEADERS,
    _TRACKING_ID,
    _UNKNOWN,
    _WAIT,
    _body,
    _enum,
    _forwarded,
    _json,
    _op,
    _path,
    _problem,
    _query,
    _ref,
    _schema,
    _unguarded,
)
from orchestrator.vocabulary import Kind, Outcome, TrackingState


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
                    _query("group", GROUP_NAME),
                    _query("label", {"type": "string", "pattern": "^[^:]+:.*$"}),
                    _LIMIT,
                    _CURSOR,
                ],
            ),
        },
        **group_paths(),
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
