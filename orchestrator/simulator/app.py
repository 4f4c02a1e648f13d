"""The aiohttp application: routes, and one middleware for schedules, faults and logging."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler

from orchestrator.simulator import (
    persist,
    routes_admin,
    routes_control,
    routes_runtime,
    routes_work,
)
from orchestrator.simulator.bodies import BadRequest
from orchestrator.simulator.faults import FaultRule
from orchestrator.simulator.keys import SIM_ID, STATE, STATE_PATH
from orchestrator.simulator.openapi import build_document
from orchestrator.simulator.present import json_response, problem
from orchestrator.simulator.profiles import Profile, builtin_profiles
from orchestrator.simulator.reqlog import REPLICA_HEADER
from orchestrator.simulator.state import Refused, SimState

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
                st.log.count(group, 0)
                if st.log.enabled:
                    st.log.record(
                        rid, now, request.method, request.path_qs, group, 0,
                        request.headers.get(REPLICA_HEADER),
                    )  # fmt: skip
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
    st.log.count(group, response.status)
    if st.log.enabled:
        rid = request.get(SIM_ID, rid)
        st.log.record(
            rid, now, request.method, request.path_qs, group, response.status,
            request.headers.get(REPLICA_HEADER),
        )  # fmt: skip
    return response


async def openapi(request: web.Request) -> web.Response:
    # Built once per profile: a profile may rename the list routes' filters.
    profile = request.app[STATE].profile
    documents = request.app[_OPENAPI]
    body = documents.get(profile.name)
    if body is None:
        body = documents[profile.name] = orjson.dumps(build_document(profile.filter_names))
    return web.Response(body=body, content_type="application/json")


async def legacy_imports(request: web.Request) -> web.Response:
    return json_response({"Items": [], "Total": 0})


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
    app.router.add_get("/swagger/v1/swagger.json", openapi, name="openapi")
    app.router.add_get(
        "/api/workspace/admin/legacy-imports", legacy_imports, name="admin.legacy_imports"
    )
    routes_runtime.add_routes(app)
    routes_admin.add_routes(app)
    routes_control.add_routes(app)
    routes_work.add_routes(app)
    return app
