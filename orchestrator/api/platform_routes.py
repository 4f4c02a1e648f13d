"""Routes of the platform's other surfaces: execution-model discovery, retry-chain stop."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from orchestrator.api.models import valid_rfc3339
from orchestrator.api.problems import forwarded_problem
from orchestrator.api.trackings import (
    json_response,
    path_tracking_id,
    read_json,
    tracker_of,
    tracking_problem,
)
from orchestrator.errors import ApiProblem, TrackingError, UnknownWorkspace
from orchestrator.platform.discovery import DiscoveryError
from orchestrator.platform.execution_model import FUNCTION_KEY_RULE, valid_function_key
from orchestrator.runtime import RUNTIME

routes = web.RouteTableDef()

_NO_RETRY_CHAIN = ("Cannot stop retries", "only function jobs have a retry chain")
_MODEL_QUERY = frozenset({"workspace"})


@routes.get("/v1/functions/{function_key}/execution-model")
async def get_execution_model(request: web.Request) -> web.Response:
    tracker = tracker_of(request.app[RUNTIME])
    key = request.match_info["function_key"]
    if not valid_function_key(key):
        raise ApiProblem(
            422,
            "Invalid request",
            f"function_key: {FUNCTION_KEY_RULE}",
            field="function_key",
        )
    for name in request.query:
        if name not in _MODEL_QUERY:
            raise ApiProblem(422, "Invalid request", f"{name}: unknown parameter", field=name)
    name = request.query.get("workspace") or "default"
    try:
        answer = await tracker.execution_model(name, key)
    except UnknownWorkspace:
        raise ApiProblem(
            422, "Invalid request", "workspace: unknown workspace", field="workspace"
        ) from None
    except DiscoveryError as exc:
        why = exc.failure
        extra = {"route": exc.route, "result": exc.read.result, **why.extra}
        raise forwarded_problem(
            why.status, why.detail, "Workspace error", extra, why.retry_after
        ) from None
    if answer is None:
        raise ApiProblem(
            404,
            "Unknown function",
            f"the Function Catalog of workspace {name} has no function key {key}",
            field="function_key",
        )
    return json_response(answer)


def _expected_version(raw: Any) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) - {"expected_modified_at"}:
        raise ApiProblem(
            422,
            "Invalid request",
            'body: only {"expected_modified_at": "<ModifiedAt>"} is accepted',
            field="body",
        )
    value = raw.get("expected_modified_at")
    if value is not None and (
        not isinstance(value, str) or len(value) > 64 or not valid_rfc3339(value)
    ):
        raise ApiProblem(
            422,
            "Invalid request",
            "expected_modified_at: must be the job's ModifiedAt, an RFC 3339 date-time "
            "with a zone (e.g. 2026-05-01T12:00:00.000Z)",
            field="expected_modified_at",
        )
    return value


@routes.post("/v1/trackings/{tracking_id}/stop-retries")
async def stop_retries(request: web.Request) -> web.Response:
    tracker = tracker_of(request.app[RUNTIME])
    tracking_id = path_tracking_id(request)
    try:
        # Before the body is read: a tracking that cannot have its retries stopped
        # is refused as such whatever the body says.
        tracking = await tracker.active_function_job(tracking_id)
    except TrackingError as exc:
        raise tracking_problem(exc, _NO_RETRY_CHAIN) from None
    expected = _expected_version(await read_json(request) if request.can_read_body else None)
    try:
        answer = await tracker.stop_retries(tracking_id, expected)
    except TrackingError as exc:
        raise tracking_problem(exc, _NO_RETRY_CHAIN) from None
    body = answer.body(tracking.tracking_id, tracking.remote_id)
    if answer.status in (200, 202):
        return json_response(body, answer.status)
    conflict = "Stale version" if answer.stale else "Cannot stop retries"
    extra = {k: v for k, v in body.items() if k not in ("detail", "tracking_id")}
    extra.update(answer.extra, stale=answer.stale)
    field = "expected_modified_at" if answer.stale else None
    raise forwarded_problem(
        answer.status, answer.detail, conflict, extra, answer.retry_after, field
    )
