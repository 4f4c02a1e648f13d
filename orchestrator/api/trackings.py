"""The ``/v1/trackings`` routes (intake, query, cancel, abandon, stop-retries) and
execution-model discovery.

Each handler parses and validates the request, calls one operation of the
runtime's ``Tracker`` and shapes its answer; a ``TrackingError`` becomes the
problem ``tracking_problem`` names.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web

from orchestrator import tracing
from orchestrator.api.group_intake import checked_group, follow_ups_group, group_problem
from orchestrator.api.intake import TraceIntake, follow_up, follow_up_items, validate_intake
from orchestrator.api.models import GROUP_RULE, MAX_BATCH, valid_remote_id, valid_rfc3339
from orchestrator.api.problems import forwarded_problem, invalid, json_response, read_json
from orchestrator.errors import (
    AlreadyTerminal,
    ApiProblem,
    EndedMeanwhile,
    GroupSealed,
    NotAFunctionJob,
    StillLoading,
    TrackingError,
    TrackingNotFound,
    UnknownWorkspace,
)
from orchestrator.platform.discovery import DiscoveryError
from orchestrator.platform.execution_model import FUNCTION_KEY_RULE, valid_function_key
from orchestrator.resource import tracking_resource
from orchestrator.runtime import RUNTIME, Runtime
from orchestrator.store.base import NewTracking, TrackingQuery
from orchestrator.vocabulary import Kind, Outcome, TrackingState

if TYPE_CHECKING:
    from orchestrator.tracker import Tracker

routes = web.RouteTableDef()

_TRACKING_ID = re.compile(r"trk_[0-9a-f]{24}")
# A server-side wait's bound: under the usual 60 s idle timeout of proxies and clients.
MAX_WAIT_S = 60
_WAIT = re.compile(r"[0-9]{1,2}(\.[0-9]{1,3})?")
_NOT_CANCELLABLE = ("Not cancellable", "only function jobs can be cancelled")
_NO_RETRY_CHAIN = ("Cannot stop retries", "only function jobs have a retry chain")


def tracker_of(rt: Runtime) -> Tracker:
    if rt.tracker is None:
        raise RuntimeError("the tracking routes need a runtime with a tracker")
    return rt.tracker


def path_tracking_id(request: web.Request) -> str:
    """The path's tracking id; one that no tracking could have is not found."""
    tracking_id = request.match_info["tracking_id"]
    if not _TRACKING_ID.fullmatch(tracking_id):
        raise ApiProblem(404, "Not found", "no such tracking", field="tracking_id")
    return tracking_id


def tracking_problem(
    exc: TrackingError, not_function_job: tuple[str, str] = ("", "")
) -> ApiProblem:
    """The problem that answers a refusal of the tracker.

    ``not_function_job``: the title and detail of the route that only function jobs have.
    """
    if isinstance(exc, StillLoading):
        detail = "the service is loading its active trackings; retry in a moment"
        return ApiProblem(503, "Loading", detail, headers={"Retry-After": "1"})
    if isinstance(exc, TrackingNotFound):
        return ApiProblem(404, "Not found", "no such tracking", field="tracking_id")
    if isinstance(exc, NotAFunctionJob):
        title, detail = not_function_job
        return ApiProblem(409, title, detail, field="kind")
    if isinstance(exc, EndedMeanwhile):
        return ApiProblem(409, "Already terminal", "the tracking has just ended")
    if isinstance(exc, AlreadyTerminal):
        return ApiProblem(
            409,
            "Already terminal",
            f"the tracking ended as {exc.outcome}",
            extra={"outcome": exc.outcome},
        )
    return ApiProblem(409, "Conflict", str(exc))


def _accepting(request: web.Request) -> Runtime:
    rt = request.app[RUNTIME]
    if rt.draining:
        raise ApiProblem(
            503,
            "Shutting down",
            "the service is draining; retry on another instance",
            headers={"Retry-After": "5"},
        )
    return rt


@routes.post("/v1/trackings")
async def create_tracking(request: web.Request) -> web.Response:
    rt = _accepting(request)
    declared = tracker_of(rt).filter_names
    trace = TraceIntake(request.headers, rt.metrics.trace_context_ignored_total)
    with tracing.server_span("POST", "/v1/trackings", *trace.caller()) as span:
        trace.continue_in(span)
        raw = await read_json(request)
        item = validate_intake(raw, rt.settings, rt.clock.now(), declared, trace)
        try:
            [(tracking, created)] = await tracker_of(rt).track([item])
        except GroupSealed as exc:
            raise group_problem(exc) from None
        tracing.answered(span, 201 if created else 200)
    return json_response(tracking_resource(tracking), 201 if created else 200)


@routes.post("/v1/trackings/batch")
async def create_batch(request: web.Request) -> web.Response:
    rt = _accepting(request)
    raw = await read_json(request)
    if not isinstance(raw, dict) or "items" not in raw or set(raw) - {"items", "group", "seal"}:
        raise ApiProblem(
            422, "Invalid request", 'body: must be {"items": [...]} (with "group", "seal")',
            field="items",
        )  # fmt: skip
    group = None if raw.get("group") is None else checked_group(raw["group"])
    seal = raw.get("seal", False)
    if not isinstance(seal, bool) or (seal and group is None):
        raise invalid("seal", "true or false, and true only with the batch's group")
    items = raw["items"]
    if not isinstance(items, list) or not items:
        raise invalid("items", "must be a non-empty list")
    if len(items) > MAX_BATCH:
        raise invalid("items", f"at most {MAX_BATCH} per batch")
    now = rt.clock.now()
    declared = tracker_of(rt).filter_names
    trace = TraceIntake(request.headers, rt.metrics.trace_context_ignored_total)
    answers: list[dict[str, Any] | None] = []
    valid: list[NewTracking] = []
    with tracing.server_span("POST", "/v1/trackings/batch", *trace.caller()) as span:
        trace.continue_in(span)
        for i, item in enumerate(items):
            if group is not None and isinstance(item, dict) and item.get("group") is None:
                item = {**item, "group": group}
            try:
                valid.append(validate_intake(item, rt.settings, now, declared, trace))
                answers.append(None)
            except ApiProblem as problem:
                body = problem.to_body()
                if problem.field:
                    body["field"] = f"items.{i}.{problem.field}"
                answers.append({"status": problem.status, "problem": body})
        sealing = tracker_of(rt).group_seal(group, now, trace.caller()) if seal and group else None
        try:
            stored = iter(await tracker_of(rt).track(valid, sealing))
        except GroupSealed as exc:
            raise group_problem(exc) from None
        tracing.answered(span, 200)
    for i, answer in enumerate(answers):
        if answer is None:
            made, created = next(stored)
            answers[i] = {"status": 201 if created else 200, "tracking": tracking_resource(made)}
    return json_response({"items": answers})


@routes.post("/v1/trackings/follow-ups")
async def create_follow_ups(request: web.Request) -> web.Response:
    rt = _accepting(request)
    raw = await read_json(request)
    body, bodies = follow_up_items(raw)
    group, seal = follow_ups_group(raw)
    now = rt.clock.now()
    trace = TraceIntake(request.headers, rt.metrics.trace_context_ignored_total)
    with tracing.server_span("POST", "/v1/trackings/follow-ups", *trace.caller()) as span:
        trace.continue_in(span)
        items = [
            validate_intake({**b, "group": group}, rt.settings, now, trace=trace) for b in bodies
        ]
        if not items:
            validate_intake(follow_up(body, "follow-up"), rt.settings, now)  # nothing is tracked
        tracker = tracker_of(rt)
        # A sealed group is made even with no members (then it ends at once, empty).
        sealing = tracker.group_seal(group, now, trace.caller()) if seal else None
        try:
            stored = await tracker.track(items, sealing)
        except GroupSealed as exc:
            raise group_problem(exc) from None
        tracing.answered(span, 200)
    if sealing is not None:
        rt.bus.publish()
    items_out = [tracking_resource(t) for t, _ in stored]
    return json_response({"items": items_out, "group": group})


@routes.get("/v1/trackings/{tracking_id}")
@routes.delete("/v1/trackings/{tracking_id}")
async def one_tracking(request: web.Request) -> web.Response:
    """GET (and HEAD): the tracking, with ``?wait=S`` once it has ended or after S
    seconds; DELETE: abandon it, leaving the remote work alone."""
    tracker = tracker_of(request.app[RUNTIME])
    tracking_id = path_tracking_id(request)
    if request.method == "DELETE":
        await _no_body(request, "abandon")  # the request's shape before the tracking's state
    wait_s = wait_param(request)
    try:
        if request.method == "DELETE":
            tracking = await tracker.abandon(tracking_id)
        elif wait_s:
            tracking = await tracker.wait(tracking_id, wait_s, lambda: client_gone(request))
        else:
            tracking = await tracker.get(tracking_id)
    except TrackingError as exc:
        raise tracking_problem(exc) from None
    return json_response(tracking_resource(tracking))


def wait_param(request: web.Request) -> float:
    """``?wait=S``: seconds, 0 to ``MAX_WAIT_S`` (0 or absent: answer at once)."""
    raw = request.query.get("wait")
    if raw is None:
        return 0.0
    if not _WAIT.fullmatch(raw) or float(raw) > MAX_WAIT_S:
        raise bad_query("wait", f"must be a number of seconds from 0 to {MAX_WAIT_S}")
    return float(raw)


def client_gone(request: web.Request) -> bool:
    """The caller closed its connection, or the service drains: a wait answers now."""
    transport = request.transport
    return request.app[RUNTIME].draining or transport is None or transport.is_closing()


async def _no_body(request: web.Request, what: str) -> None:
    """A command that takes no body (or ``{}``): anything else is a 422 naming ``body``."""
    if request.can_read_body and await read_json(request) != {}:
        raise invalid("body", f"{what} takes no body (or {{}})")


_Word = TypeVar("_Word", bound=StrEnum)


def _choice(query: Any, name: str, vocabulary: type[_Word]) -> _Word | None:
    value = query.get(name)
    if value is None or value == "":
        return None
    try:
        return vocabulary(value)
    except ValueError:
        raise bad_query(name, f"must be one of {', '.join(vocabulary)}") from None


def bad_query(name: str, message: str) -> ApiProblem:
    return invalid(name, message, 422, "Invalid query")


@routes.get("/v1/trackings")
async def list_trackings(request: web.Request) -> web.Response:
    rt = request.app[RUNTIME]
    q = request.query
    labels: dict[str, str] = {}
    for pair in q.getall("label", []):
        key, sep, value = pair.partition(":")
        if not sep or not key:
            raise bad_query("label", "must be key:value")
        labels[key] = value
    limit_text = q.get("limit", "100")
    # isdigit() alone accepts "²" and other Unicode digits that int() refuses.
    if not (limit_text.isascii() and limit_text.isdigit()) or not 1 <= int(limit_text) <= 1000:
        raise bad_query("limit", "must be 1-1000")
    workspace = q.get("workspace") or None
    if workspace is not None and rt.settings.workspace(workspace) is None:
        raise bad_query("workspace", "unknown workspace")
    group = q.get("group") or None
    if group is not None and not valid_remote_id(group):
        raise bad_query("group", GROUP_RULE)
    query = TrackingQuery(
        state=_choice(q, "state", TrackingState),
        kind=_choice(q, "kind", Kind),
        outcome=_choice(q, "outcome", Outcome),
        workspace=workspace,
        group=group,
        labels=labels,
        limit=int(limit_text),
        cursor=q.get("cursor") or None,
    )
    try:
        items, cursor = await tracker_of(rt).list(query)
    except ValueError:  # InvalidCursor
        raise bad_query("cursor", "not a cursor") from None
    return json_response({"items": [tracking_resource(t) for t in items], "next_cursor": cursor})


@routes.post("/v1/trackings/{tracking_id}/cancel")
async def cancel_tracking(request: web.Request) -> web.Response:
    tracker = tracker_of(request.app[RUNTIME])
    tracking_id = path_tracking_id(request)
    # In the documented order: the request's shape (422), then the tracking's
    # state (404, 409), and only then is the workspace asked anything.
    await _no_body(request, "cancel")
    try:
        await tracker.active_function_job(tracking_id)
        answer = await tracker.cancel(tracking_id)
    except TrackingError as exc:
        raise tracking_problem(exc, _NOT_CANCELLABLE) from None
    body = {
        "tracking_id": tracking_id,
        "remote_status": answer.remote_status,
        "detail": answer.detail,
    }
    if answer.status == 202:
        return json_response(body, 202)
    extra = {"remote_status": answer.remote_status, **answer.extra}
    raise forwarded_problem(
        answer.status, answer.detail, "Cannot cancel", extra, answer.retry_after
    )


@routes.get("/v1/functions/{function_key}/execution-model")
async def get_execution_model(request: web.Request) -> web.Response:
    tracker = tracker_of(request.app[RUNTIME])
    key = request.match_info["function_key"]
    if not valid_function_key(key):
        raise invalid("function_key", FUNCTION_KEY_RULE)
    for name in request.query:
        if name != "workspace":
            raise invalid(name, "unknown parameter")
    name = request.query.get("workspace") or "default"
    try:
        answer = await tracker.execution_model(name, key)
    except UnknownWorkspace:
        raise invalid("workspace", "unknown workspace") from None
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
        raise invalid("body", 'only {"expected_modified_at": "<ModifiedAt>"} is accepted')
    value = raw.get("expected_modified_at")
    if value is not None and (
        not isinstance(value, str) or len(value) > 64 or not valid_rfc3339(value)
    ):
        raise invalid(
            "expected_modified_at",
            "must be the job's ModifiedAt, an RFC 3339 date-time "
            "with a zone (e.g. 2026-05-01T12:00:00.000Z)",
        )
    return value


@routes.post("/v1/trackings/{tracking_id}/stop-retries")
async def stop_retries(request: web.Request) -> web.Response:
    tracker = tracker_of(request.app[RUNTIME])
    tracking_id = path_tracking_id(request)
    # The request's shape (422) before the tracking's state (404, 409), as for cancel.
    expected = _expected_version(await read_json(request) if request.can_read_body else None)
    try:
        tracking = await tracker.active_function_job(tracking_id)
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
