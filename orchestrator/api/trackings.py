"""The ``/v1/trackings`` routes: intake, query, cancel, abandon."""

from __future__ import annotations

import re
from collections import Counter
from enum import StrEnum
from typing import Any, TypeVar

import orjson
from aiohttp import web

from orchestrator.api.intake import follow_up_items, validate_intake
from orchestrator.api.models import MAX_BATCH
from orchestrator.engine.cancel import cancel
from orchestrator.errors import ApiProblem
from orchestrator.resource import tracking_resource
from orchestrator.runtime import RUNTIME, Runtime
from orchestrator.store.base import NewTracking, Tracking, TrackingQuery
from orchestrator.vocabulary import Kind, Outcome, TrackingState

routes = web.RouteTableDef()

_TRACKING_ID = re.compile(r"trk_[0-9a-f]{24}")


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


async def read_json(request: web.Request) -> Any:
    ctype = request.content_type
    if ctype != "application/json" and not ctype.endswith("+json"):
        raise ApiProblem(
            415,
            "Unsupported media type",
            "Content-Type must be application/json",
            field="Content-Type",
        )
    raw = await request.read()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ApiProblem(
            400, "Malformed JSON", "the body is not valid JSON", field="body"
        ) from None


def _accepting(rt: Runtime) -> None:
    if rt.draining:
        raise ApiProblem(
            503,
            "Shutting down",
            "the service is draining; retry on another instance",
            headers={"Retry-After": "5"},
        )


async def _store_and_start(rt: Runtime, items: list[NewTracking]) -> list[tuple[Tracking, bool]]:
    stored = await rt.store.create_trackings(items)
    counts: Counter[tuple[str, str]] = Counter()
    for tracking, created in stored:
        if created:
            counts[tracking.workspace, tracking.kind] += 1
            rt.engine.add(tracking)
    for (workspace, kind), n in counts.items():
        rt.metrics.trackings_created_total.labels(workspace=workspace, kind=kind).inc(n)
    return stored


@routes.post("/v1/trackings")
async def create_tracking(request: web.Request) -> web.Response:
    rt = request.app[RUNTIME]
    _accepting(rt)
    item = validate_intake(await read_json(request), rt.settings, rt.clock.now())
    [(tracking, created)] = await _store_and_start(rt, [item])
    return json_response(tracking_resource(tracking), 201 if created else 200)


@routes.post("/v1/trackings/batch")
async def create_batch(request: web.Request) -> web.Response:
    rt = request.app[RUNTIME]
    _accepting(rt)
    raw = await read_json(request)
    if not isinstance(raw, dict) or set(raw) != {"items"}:
        raise ApiProblem(422, "Invalid request", 'body: must be {"items": [...]}', field="items")
    items = raw["items"]
    if not isinstance(items, list) or not items:
        raise ApiProblem(422, "Invalid request", "items: must be a non-empty list", field="items")
    if len(items) > MAX_BATCH:
        raise ApiProblem(
            422, "Invalid request", f"items: at most {MAX_BATCH} per batch", field="items"
        )
    now = rt.clock.now()
    answers: list[dict[str, Any] | None] = []
    valid: list[NewTracking] = []
    for i, item in enumerate(items):
        try:
            valid.append(validate_intake(item, rt.settings, now))
            answers.append(None)
        except ApiProblem as problem:
            body = problem.to_body()
            if problem.field:
                body["field"] = f"items.{i}.{problem.field}"
            answers.append({"status": problem.status, "problem": body})
    stored = iter(await _store_and_start(rt, valid) if valid else [])
    out = []
    for answer in answers:
        if answer is None:
            tracking, created = next(stored)
            answer = {"status": 201 if created else 200, "tracking": tracking_resource(tracking)}
        out.append(answer)
    return json_response({"items": out})


@routes.post("/v1/trackings/follow-ups")
async def create_follow_ups(request: web.Request) -> web.Response:
    rt = request.app[RUNTIME]
    _accepting(rt)
    _, bodies = follow_up_items(await read_json(request))
    now = rt.clock.now()
    items = [validate_intake(b, rt.settings, now) for b in bodies]
    stored = await _store_and_start(rt, items) if items else []
    return json_response({"items": [tracking_resource(t) for t, _ in stored]})


async def _tracking(request: web.Request) -> Tracking:
    tracking_id = request.match_info["tracking_id"]
    if not _TRACKING_ID.fullmatch(tracking_id):
        raise ApiProblem(404, "Not found", "no such tracking", field="tracking_id")
    tracking = await request.app[RUNTIME].store.get_tracking(tracking_id)
    if tracking is None:
        raise ApiProblem(404, "Not found", "no such tracking", field="tracking_id")
    return tracking


async def active_function_job(request: web.Request, title: str, detail: str) -> Tracking:
    """The path's tracking, when it is an active function job; else a 404/409 problem."""
    tracking = await _tracking(request)
    if tracking.kind != Kind.FUNCTION_JOB:
        raise ApiProblem(409, title, detail, field="kind")
    if tracking.state != TrackingState.ACTIVE:
        raise ApiProblem(
            409,
            "Already terminal",
            f"the tracking ended as {tracking.outcome}",
            extra={"outcome": tracking.outcome},
        )
    return tracking


@routes.get("/v1/trackings/{tracking_id}")
async def get_tracking(request: web.Request) -> web.Response:
    live = request.app[RUNTIME].engine.live
    return json_response(tracking_resource(live(await _tracking(request))))


_Word = TypeVar("_Word", bound=StrEnum)


def _choice(query: Any, name: str, vocabulary: type[_Word]) -> _Word | None:
    value = query.get(name)
    if value is None or value == "":
        return None
    try:
        return vocabulary(value)
    except ValueError:
        raise ApiProblem(
            400, "Invalid query", f"{name}: must be one of {', '.join(vocabulary)}", field=name
        ) from None


@routes.get("/v1/trackings")
async def list_trackings(request: web.Request) -> web.Response:
    rt = request.app[RUNTIME]
    q = request.query
    labels: dict[str, str] = {}
    for pair in q.getall("label", []):
        key, sep, value = pair.partition(":")
        if not sep or not key:
            raise ApiProblem(400, "Invalid query", "label: must be key:value", field="label")
        labels[key] = value
    limit_text = q.get("limit", "100")
    # isdigit() alone accepts "²" and other Unicode digits that int() refuses.
    if not (limit_text.isascii() and limit_text.isdigit()) or not 1 <= int(limit_text) <= 1000:
        raise ApiProblem(400, "Invalid query", "limit: must be 1-1000", field="limit")
    workspace = q.get("workspace") or None
    if workspace is not None and rt.settings.workspace(workspace) is None:
        raise ApiProblem(400, "Invalid query", "workspace: unknown workspace", field="workspace")
    query = TrackingQuery(
        state=_choice(q, "state", TrackingState),
        kind=_choice(q, "kind", Kind),
        outcome=_choice(q, "outcome", Outcome),
        workspace=workspace,
        labels=labels,
        limit=int(limit_text),
        cursor=q.get("cursor") or None,
    )
    try:
        items, cursor = await rt.store.list_trackings(query)
    except ValueError:
        raise ApiProblem(400, "Invalid query", "cursor: not a cursor", field="cursor") from None
    live = rt.engine.live
    return json_response(
        {"items": [tracking_resource(live(t)) for t in items], "next_cursor": cursor}
    )


@routes.post("/v1/trackings/{tracking_id}/cancel")
async def cancel_tracking(request: web.Request) -> web.Response:
    rt = request.app[RUNTIME]
    tracking = await active_function_job(
        request, "Not cancellable", "only function jobs can be cancelled"
    )
    answer = await cancel(rt.engine, tracking.tracking_id)
    if answer is None:
        raise ApiProblem(409, "Already terminal", "the tracking has just ended")
    body = {
        "tracking_id": tracking.tracking_id,
        "remote_status": answer.remote_status,
        "detail": answer.detail,
    }
    if answer.status == 202:
        return json_response(body, 202)
    headers = {}
    if answer.retry_after is not None:
        headers["Retry-After"] = str(max(1, round(answer.retry_after)))
    title = {409: "Cannot cancel", 502: "Workspace error", 503: "Workspace busy"}[answer.status]
    raise ApiProblem(
        answer.status,
        title,
        answer.detail,
        extra={"remote_status": answer.remote_status},
        headers=headers,
    )


@routes.delete("/v1/trackings/{tracking_id}")
async def abandon_tracking(request: web.Request) -> web.Response:
    rt = request.app[RUNTIME]
    tracking = await _tracking(request)
    if tracking.state == TrackingState.ACTIVE:
        ended = await rt.engine.abandon(tracking.tracking_id)
        if ended is not None:
            return json_response(tracking_resource(ended))
        tracking = await _tracking(request)
    raise ApiProblem(
        409,
        "Already terminal",
        f"the tracking ended as {tracking.outcome}",
        extra={"outcome": tracking.outcome},
    )
