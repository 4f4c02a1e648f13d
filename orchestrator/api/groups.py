"""The ``/v1/groups`` routes (seal, read, wait, list) and the group options of intake.

A group is named by its caller, global across workspaces (one namespace for the
whole service: ``billing:import-42`` and ``release-7`` are the caller's to
choose). Its members join on intake (``group``); it is sealed by
``POST /v1/groups/{group}/seal``, by ``group_expect`` members, or by the batch or
follow-ups call that says so.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from aiohttp import web

from orchestrator.api.group_intake import group_problem
from orchestrator.api.intake import TraceIntake
from orchestrator.api.models import valid_remote_id, valid_rfc3339
from orchestrator.api.problems import invalid, json_response, read_json
from orchestrator.api.trackings import bad_query, client_gone, tracker_of, wait_param
from orchestrator.errors import ApiProblem, GroupError, GroupNotFound
from orchestrator.group_resource import group_resource
from orchestrator.runtime import RUNTIME
from orchestrator.store.groups import GROUP_STATES, GroupState

if TYPE_CHECKING:
    from orchestrator.runtime import Runtime

routes = web.RouteTableDef()

MAX_GROUP_TIMEOUT_S = 30 * 86400  # a group deadline: up to 30 days ahead


def _path_group(request: web.Request) -> str:
    name = request.match_info["group"]
    if not valid_remote_id(name):  # no group could have it
        raise ApiProblem(404, "Not found", "no such group", field="group")
    return name


def _deadline(raw: Any, now: float) -> float | None:
    if raw is None or raw == {}:
        return None
    if not isinstance(raw, dict) or set(raw) - {"deadline_at", "timeout_s"} or len(raw) > 1:
        raise invalid("body", 'only {} or one of {"deadline_at": ...}, {"timeout_s": ...}')
    if "timeout_s" in raw:
        t = raw["timeout_s"]
        if (
            isinstance(t, bool)
            or not isinstance(t, int | float)
            or not 0 < t <= MAX_GROUP_TIMEOUT_S
        ):
            raise invalid("timeout_s", f"must be a number of seconds, 0-{MAX_GROUP_TIMEOUT_S}")
        return now + float(t)
    at = raw["deadline_at"]
    if not isinstance(at, str) or len(at) > 64 or not valid_rfc3339(at):
        raise invalid("deadline_at", "must be an RFC 3339 date-time with a zone")
    when = datetime.fromisoformat(at.replace("Z", "+00:00").replace("z", "+00:00")).timestamp()
    if not now < when <= now + MAX_GROUP_TIMEOUT_S:
        raise invalid("deadline_at", "must lie in the future, at most 30 days ahead")
    return when


@routes.post("/v1/groups/{group}/seal")
async def seal_group(request: web.Request) -> web.Response:
    """No more members; idempotent (the first seal's time and trace stand). A group
    whose members have all ended ends now, with its event."""
    rt: Runtime = request.app[RUNTIME]
    name = _path_group(request)
    now = rt.clock.now()
    deadline = _deadline(await read_json(request) if request.can_read_body else None, now)
    trace = TraceIntake(request.headers, rt.metrics.trace_context_ignored_total)
    try:
        sealed = await tracker_of(rt).seal_group(name, now, trace.caller(), deadline)
    except GroupError as exc:
        raise group_problem(exc) from None
    rt.bus.publish()  # its event, if it ended now: feed, SSE and deliveries read it
    return json_response(group_resource(sealed))


@routes.get("/v1/groups/{group}")
async def get_group(request: web.Request) -> web.Response:
    """The group; with ``?wait=S`` once it has ended, or after S as it is then."""
    tracker = tracker_of(request.app[RUNTIME])
    name = _path_group(request)
    wait_s = wait_param(request)
    try:
        if wait_s:
            found = await tracker.wait_group(name, wait_s, lambda: client_gone(request))
        else:
            found = await tracker.group(name)
    except GroupNotFound as exc:
        raise group_problem(exc) from None
    return json_response(group_resource(found))


@routes.get("/v1/groups")
async def list_groups(request: web.Request) -> web.Response:
    q = request.query
    state = q.get("state") or None
    if state is not None and state not in GROUP_STATES:
        raise bad_query("state", f"must be one of {', '.join(GROUP_STATES)}")
    limit_text = q.get("limit", "100")
    if not (limit_text.isascii() and limit_text.isdigit()) or not 1 <= int(limit_text) <= 1000:
        raise bad_query("limit", "must be 1-1000")
    chosen: GroupState | None = state
    try:
        items, cursor = await tracker_of(request.app[RUNTIME]).groups(
            chosen, int(limit_text), q.get("cursor") or None
        )
    except ValueError:
        raise bad_query("cursor", "not a cursor") from None
    return json_response({"items": [group_resource(g) for g in items], "next_cursor": cursor})
