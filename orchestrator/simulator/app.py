"""The aiohttp application: routes, and one middleware for schedules, faults and logging."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler

from orchestrator.simulator import openapi as doc
from orchestrator.simulator import persist
from orchestrator.simulator import routes_control as control
from orchestrator.simulator import routes_workspace as ws
from orchestrator.simulator.faults import FaultRule
from orchestrator.simulator.keys import SIM_ID, STATE, STATE_PATH
from orchestrator.simulator.present import BadRequest, problem
from orchestrator.simulator.profiles import Profile, builtin_profiles
from orchestrator.simulator.reqlog import REPLICA_HEADER, RequestLog
from orchestrator.simulator.state import Refused, SimState

_PROJECT = f"{doc.ADMIN}/{{project:net-operation-project|ui-project}}"
_SCHEDULE = "/_sim/schedules/{scheduleId}"
_ID_KEYS = ("jobId", "buildId", "scheduleId", "functionId", "actionId", "entityId")
_OPENAPI: web.AppKey[dict[str, bytes]] = web.AppKey("sim_openapi", dict)


def _route_of(request: web.Request) -> tuple[str, str | None]:
    """(fault/log route group, the id the path names)."""
    match = request.match_info
    name = match.route.name
    group = name.split(".", 1)[0] if name else "unmatched"
    for key in _ID_KEYS:
        rid = match.get(key)
        if rid is not None:
            return group, rid
    return group, None


def _fault_response(rule: FaultRule, now: float) -> web.StreamResponse | None:
    if rule.fault == "http_5xx":
        return problem(rule.status, "Injected server error.")
    if rule.fault in ("rate_limited", "unavailable"):
        status = 429 if rule.fault == "rate_limited" else 503
        return problem(status, "Injected back-pressure.", {"Retry-After": rule.retry_after(now)})
    if rule.fault == "not_found":
        return problem(404, "Injected not found.")
    return None


def _truncated(response: web.StreamResponse) -> web.Response:
    body = response.body if isinstance(response, web.Response) else None
    data = body if isinstance(body, bytes) and len(body) > 2 else b'{"Status": 1, "Run": {"Sta'
    return web.Response(body=data[: max(1, len(data) // 2)], content_type="application/json")


async def _dispatch(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except BadRequest as exc:
        return problem(400, str(exc))
    except Refused as exc:
        return problem(exc.status, exc.detail)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        headers = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "retry-after")}
        return problem(exc.status, exc.reason, headers)


_READS = frozenset({"GET", "HEAD", "OPTIONS"})


@web.middleware
async def simulator_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    st = request.app[STATE]
    jobs_before = len(st.jobs)
    now = st.clock()
    st.tick(now)
    group, rid = _route_of(request)
    response: web.StreamResponse | None = None
    malformed = False
    if group != "control" and st.faults.rules:
        for rule in st.faults.decide(group, rid, now):
            if rule.fault == "latency":
                await asyncio.sleep(rule.latency_s)
            elif rule.fault == "reset":
                _log(st.log, request, rid, now, group, 0)
                if request.transport is not None:
                    request.transport.abort()
                raise asyncio.CancelledError  # nothing is answered on a dead connection
            elif rule.fault == "malformed":
                malformed = True
            else:
                response = _fault_response(rule, now)
    if response is None:
        response = await _dispatch(request, handler)
        if malformed and response.status < 400:
            response = _truncated(response)
    path = request.app[STATE_PATH]
    if path is not None and (request.method not in _READS or len(st.jobs) != jobs_before):
        persist.save(st, path)
    _log(st.log, request, request.get(SIM_ID, rid), now, group, response.status)
    return response


def _log(
    log: RequestLog, request: web.Request, rid: str | None, now: float, group: str, status: int
) -> None:
    log.count(group, status)
    if log.enabled:
        replica = request.headers.get(REPLICA_HEADER)
        log.record(rid, now, request.method, request.path_qs, group, status, replica)


async def openapi(request: web.Request) -> web.Response:
    # Built once per profile: a profile may rename the list routes' filters.
    profile = request.app[STATE].profile
    documents = request.app[_OPENAPI]
    body = documents.get(profile.name)
    if body is None:
        body = documents[profile.name] = orjson.dumps(doc.build_document(profile.filter_names))
    return web.Response(body=body, content_type="application/json")


def create_app(
    profile: str | Profile = "default",
    seed: int | None = None,
    *,
    clock: Callable[[], float] = time.time,
    state_path: Path | None = None,
) -> web.Application:
    """A simulated Moltaro workspace as an aiohttp application (nothing runs until served).

    With ``state_path``, the state saved there (if any) is taken up and every
    change is saved there again (``persist.py``).
    """
    if isinstance(profile, str):
        profiles = builtin_profiles()
        if profile not in profiles:
            raise ValueError(f"unknown simulator profile {profile!r}: one of {sorted(profiles)}")
        profile = profiles[profile]
    app = web.Application(middlewares=[simulator_middleware])
    restored = None if state_path is None else persist.load(state_path)
    app[STATE] = restored if restored is not None else SimState(profile, seed, clock)
    app[STATE_PATH] = state_path
    app[_OPENAPI] = {}
    app.add_routes(_ROUTES)
    return app


# Every route, in the order registered. A name's prefix is its group for faults and the
# request log ("control": the /_sim/ API, which faults never touch).
_ROUTES = [
    web.get("/swagger/v1/swagger.json", openapi, name="openapi"),
    web.get(f"{doc.ADMIN}/legacy-imports", ws.legacy_imports, name="admin.legacy_imports"),
    web.post(f"{doc.FN}/{{functionKey}}/enqueue", ws.job_enqueue, name="job_enqueue"),
    web.get(f"{doc.FN}/jobs/{{jobId}}", ws.job_status, name="job_status"),
    web.post(f"{doc.FN}/jobs/{{jobId}}/cancel", ws.job_cancel, name="job_cancel"),
    web.post(f"{_PROJECT}/builds", ws.build_submit, name="build_submit"),
    web.get(f"{_PROJECT}/builds/{{buildId}}", ws.build_status, name="build_status"),
    web.get(f"{doc.OPS}/jobs", ws.list_jobs, name="admin.jobs"),
    web.get(f"{doc.OPS}/jobs/{{jobId}}", ws.job_detail, name="admin.job"),
    web.post(f"{doc.OPS}/jobs/{{jobId}}/stop-retries", ws.stop_retries, name="admin.stop_retries"),
    web.get(f"{doc.OPS}/runs", ws.list_runs, name="admin.runs"),
    web.get(doc.CATALOG, ws.catalog_list, name="admin.catalog"),
    web.get(f"{doc.CATALOG}/binding-summaries", ws.bindings, name="admin.bindings"),
    web.get(f"{doc.CATALOG}/{{functionId}}", ws.catalog_one, name="admin.function"),
    web.get(f"{doc.ADMIN}/api-functions", ws.api_functions, name="admin.api_functions"),
    web.get(doc.SCHEDULES, ws.schedules_list, name="admin.schedules"),
    web.get(f"{doc.SCHEDULES}/{{scheduleId}}", ws.schedule_one, name="admin.schedule"),
    web.post("/_sim/reset", control.reset, name="control.reset"),
    web.get("/_sim/settings", control.get_settings, name="control.get_settings"),
    web.put("/_sim/settings", control.put_settings, name="control.put_settings"),
    web.get("/_sim/faults", control.get_faults, name="control.get_faults"),
    web.put("/_sim/faults", control.put_faults, name="control.put_faults"),
    web.post("/_sim/script", control.script, name="control.script"),
    web.post("/_sim/jobs", control.create_job, name="control.jobs"),
    web.post("/_sim/jobs/bulk", control.create_jobs_bulk, name="control.jobs_bulk"),
    web.get("/_sim/requests", control.requests_log, name="control.requests"),
    web.get("/_sim/stats", control.stats, name="control.stats"),
    web.post("/_sim/schedules", control.create_schedule, name="control.create_schedule"),
    web.patch(_SCHEDULE, control.patch_schedule, name="control.patch_schedule"),
    web.delete(_SCHEDULE, control.delete_schedule, name="control.delete_schedule"),
    web.get("/_sim/profile", control.get_profile, name="control.get_profile"),
    web.put("/_sim/profile", control.put_profile, name="control.put_profile"),
    web.put(doc.RECORD, ws.save_record, name="work.save_record"),
    web.post(f"{doc.RECORD}/{doc.ACTION}", ws.entity_action, name="work.entity_action"),
    web.post(f"{doc.WS}/{doc.ACTION}", ws.global_action, name="work.action"),
]
