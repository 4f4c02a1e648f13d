"""The runtime routes a caller polls: function jobs and project builds.

Status reads are the hot path: a dict lookup, then the bytes cached on the
record until its next phase change (or a settings change).
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from orchestrator.simulator.bodies import BadRequest, field, opt_str, read_object
from orchestrator.simulator.enums import JOB_STATUS, NET_BUILD_KIND, UI_BUILD_KIND
from orchestrator.simulator.keys import SIM_ID, STATE
from orchestrator.simulator.model import Build, Job
from orchestrator.simulator.present import present, problem
from orchestrator.simulator.state import SimState, valid_id

PROJECTS = {"net-operation-project": "net", "ui-project": "ui"}
BUILD_KINDS = {"net": NET_BUILD_KIND, "ui": UI_BUILD_KIND}
_JSON = "application/json"


def status_body(st: SimState, record: Job | Build, kind: str, now: float) -> bytes | None:
    """The status body ``record`` shows at ``now`` (None: not visible yet), cached on
    the record until its next phase change or a settings change."""
    version = st.settings.version
    cache = record.cache
    if cache is not None and cache[0] == version and now < cache[1]:
        return cache[2]
    view = record.view(now)
    if view is None:
        return None
    data = orjson.dumps(present(view.body, kind, st.settings))
    record.cache = (version, view.valid_until, data)
    return data


def _cached(st: SimState, record: Job | Build, kind: str, now: float) -> web.Response:
    data = status_body(st, record, kind, now)
    if data is None:
        return problem(404, "No resource with this id (yet).")
    return web.Response(body=data, content_type=_JSON)


def envelope(st: SimState, model: dict[str, Any]) -> dict[str, Any]:
    if st.settings.camel_case:
        return {"succeeded": True, "data": model}
    return {"Succeeded": True, "Data": model}


async def job_status(request: web.Request) -> web.Response:
    st = request.app[STATE]
    job = st.jobs.get(request.match_info["jobId"])
    if job is None or not job.meta.runtime_visible:
        return problem(404, "No function job with this id.")
    return _cached(st, job, "job", st.clock())


async def job_enqueue(request: web.Request) -> web.Response:
    st = request.app[STATE]
    key = request.match_info["functionKey"]
    if not valid_id(key):
        raise BadRequest("The function key is not valid.")
    body = await read_object(request)
    correlation_id = opt_str(body, "CorrelationId")
    dedup_key = opt_str(body, "DeduplicationKey")
    now = st.clock()
    job, _ = st.enqueue(key, now=now, correlation_id=correlation_id, dedup_key=dedup_key)
    request[SIM_ID] = job.meta.job_id
    view = job.view(now)
    model = present(view.body, "job", st.settings) if view is not None else None
    return web.Response(body=orjson.dumps(envelope(st, model or {})), content_type=_JSON)


async def job_cancel(request: web.Request) -> web.Response:
    st = request.app[STATE]
    job = st.jobs.get(request.match_info["jobId"])
    if job is None or not job.meta.runtime_visible:
        return problem(404, "No function job with this id.")
    now = st.clock()
    if job.view(now) is None:
        return problem(404, "No function job with this id (yet).")
    accepted, view = job.cancel(now)
    if accepted:
        return web.Response(
            body=orjson.dumps(present(view.body, "job", st.settings)), content_type=_JSON
        )
    status: Any = view.status
    if st.settings.enums_as_names and JOB_STATUS.has(view.status):
        status = JOB_STATUS.name(view.status)
    return problem(
        409, "The job cannot be cancelled in its current state (CanCancel is false).", Status=status
    )


async def build_submit(request: web.Request) -> web.Response:
    st = request.app[STATE]
    project = PROJECTS[request.match_info["project"]]
    body = await read_object(request)
    enum = BUILD_KINDS[project]
    raw_kind = field(body, "Kind")
    kind = enum.value("Build") if raw_kind is None else enum.parse(raw_kind)
    if kind is None:
        names = ", ".join(f"{n}={v}" for n, v in enum.members)
        raise BadRequest(f"Kind must be one of {names}.")
    now = st.clock()
    build = st.submit_build(project, kind, enum.name(kind), now)
    request[SIM_ID] = build.build_id
    view = build.view(now)
    data = present(view.body, project, st.settings) if view is not None else {}
    return web.Response(body=orjson.dumps(data), content_type=_JSON)


async def build_status(request: web.Request) -> web.Response:
    st = request.app[STATE]
    project = PROJECTS[request.match_info["project"]]
    build = st.builds[project].get(request.match_info["buildId"])
    if build is None:
        return problem(404, "No build with this id.")
    return _cached(st, build, project, st.clock())


def add_routes(app: web.Application) -> None:
    projects = "{project:net-operation-project|ui-project}"
    r = app.router
    r.add_post("/api/workspace/functions/{functionKey}/enqueue", job_enqueue, name="job_enqueue")
    r.add_get("/api/workspace/functions/jobs/{jobId}", job_status, name="job_status")
    r.add_post("/api/workspace/functions/jobs/{jobId}/cancel", job_cancel, name="job_cancel")
    r.add_post(f"/api/workspace/admin/{projects}/builds", build_submit, name="build_submit")
    r.add_get(
        f"/api/workspace/admin/{projects}/builds/{{buildId}}", build_status, name="build_status"
    )
