"""Administrative routes: function operations (jobs, runs, stop-retries) and configuration reads.

The list routes scan, newest first; they are diagnostics, not the polling path.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from aiohttp import web

from orchestrator.clock import parse_iso
from orchestrator.simulator import catalog
from orchestrator.simulator.bodies import (
    BadRequest,
    field,
    query,
    query_limit,
    query_time,
    read_object,
)
from orchestrator.simulator.enums import JOB_SOURCE, JOB_STATUS, RUN_STATUS, WireEnum
from orchestrator.simulator.keys import STATE
from orchestrator.simulator.model import Job
from orchestrator.simulator.present import json_response, present, present_list, problem
from orchestrator.simulator.state import SimState

ADMIN = "/api/workspace/admin"


class Filters:
    def __init__(self, request: web.Request, status_enum: WireEnum) -> None:
        self.function_id = query(request, "FunctionId")
        self.schedule_id = query(request, "ScheduleId")
        self.binding_id = query(request, "TriggerBindingId")
        self.source = self._enum(request, "Source", JOB_SOURCE)
        self.status = self._enum(request, "Status", status_enum)
        self.start = query_time(request, "From")
        self.end = query_time(request, "To")
        self.limit = query_limit(request)

    @staticmethod
    def _enum(request: web.Request, name: str, enum: WireEnum) -> int | None:
        text = query(request, name)
        if text is None:
            return None
        value = enum.parse(text)
        if value is None:
            raise BadRequest(f"{name} must be one of {[n for n, _ in enum.members]}.")
        return value

    def meta_matches(self, job: Job) -> bool:
        m = job.meta
        return (
            (
                self.function_id is None
                or self.function_id in (m.business_function_id, m.function_key)
            )
            and (self.schedule_id is None or m.schedule_id == self.schedule_id)
            and (self.binding_id is None or m.trigger_binding_id == self.binding_id)
            and (self.source is None or m.source == self.source)
        )

    def in_range(self, ts: float) -> bool:
        return (self.start is None or ts >= self.start) and (self.end is None or ts <= self.end)


def _jobs_newest_first(st: SimState) -> Iterator[Job]:
    return reversed(list(st.jobs.values()))


async def list_jobs(request: web.Request) -> web.Response:
    st = request.app[STATE]
    f = Filters(request, JOB_STATUS)
    now = st.clock()
    items: list[dict[str, Any]] = []
    total = 0
    for job in _jobs_newest_first(st):
        if not f.meta_matches(job) or not f.in_range(job.meta.created_at):
            continue
        view = job.view(now)
        if view is None or (f.status is not None and view.status != f.status):
            continue
        total += 1
        if len(items) < f.limit:
            items.append(view.body)
    return json_response(present_list(items, "job", st.settings, total))


async def list_runs(request: web.Request) -> web.Response:
    st = request.app[STATE]
    f = Filters(request, RUN_STATUS)
    now = st.clock()
    rows: list[tuple[float, dict[str, Any]]] = []
    for job in st.jobs.values():
        if f.meta_matches(job):
            rows.extend((parse_iso(r["StartedAt"]), r) for r in job.runs(now) if r.get("StartedAt"))
    if f.binding_id is None and f.source in (None, 1):
        for at, row in st.schedules.skipped_runs:
            if f.schedule_id in (None, row["ScheduleId"]) and f.function_id in (
                None,
                row["BusinessFunctionId"],
            ):
                rows.append((at, row))
    matched = [
        row
        for at, row in rows
        if f.in_range(at) and (f.status is None or row.get("Status") == f.status)
    ]
    matched.sort(key=lambda r: r["StartedAt"], reverse=True)
    return json_response(present_list(matched[: f.limit], "run", st.settings, len(matched)))


async def job_detail(request: web.Request) -> web.Response:
    st = request.app[STATE]
    job = st.jobs.get(request.match_info["jobId"])
    view = job.view(st.clock()) if job is not None else None
    if view is None:
        return problem(404, "No function job with this id.")
    return json_response(present(view.body, "job", st.settings))


async def stop_retries(request: web.Request) -> web.Response:
    st = request.app[STATE]
    job = st.jobs.get(request.match_info["jobId"])
    body = await read_object(request, required=True)
    expected = field(body, "ExpectedModifiedAt")
    if not isinstance(expected, str):
        raise BadRequest("ExpectedModifiedAt (the job's ModifiedAt) is required.")
    try:
        expected_at = parse_iso(expected)
    except (ValueError, OverflowError):
        raise BadRequest("ExpectedModifiedAt must be an ISO 8601 timestamp.") from None
    now = st.clock()
    if job is None or job.view(now) is None:
        return problem(404, "No function job with this id.")
    result = job.stop_retries(now, expected_at)
    model = present(result.view.body, "job", st.settings)
    if result.status == 409:
        return problem(
            409, result.detail, Status=model.get("Status", model.get("status")), Job=model
        )
    return json_response(model)


async def catalog_list(request: web.Request) -> web.Response:
    rows = [catalog.function_body(f) for f in catalog.FUNCTIONS]
    return json_response(present_list(rows, "function", request.app[STATE].settings))


async def catalog_one(request: web.Request) -> web.Response:
    row = catalog.FUNCTIONS_BY_ID.get(request.match_info["functionId"])
    if row is None:
        return problem(404, "No function with this BusinessFunctionId.")
    return json_response(
        present(catalog.function_body(row), "function", request.app[STATE].settings)
    )


async def bindings(request: web.Request) -> web.Response:
    rows = [catalog.binding_body(b) for b in catalog.BINDINGS]
    return json_response(present_list(rows, "binding", request.app[STATE].settings))


async def api_functions(request: web.Request) -> web.Response:
    rows = [catalog.publication_body(p) for p in catalog.PUBLICATIONS]
    return json_response(present_list(rows, "publication", request.app[STATE].settings))


async def schedules_list(request: web.Request) -> web.Response:
    st = request.app[STATE]
    now = st.clock()
    rows = [st.schedules.body(s, now) for s in st.schedules.schedules.values()]
    return json_response(present_list(rows, "schedule", st.settings))


async def schedule_one(request: web.Request) -> web.Response:
    st = request.app[STATE]
    schedule = st.schedules.schedules.get(request.match_info["scheduleId"])
    if schedule is None:
        return problem(404, "No schedule with this id.")
    body = st.schedules.body(schedule, st.clock())
    return json_response(present(body, "schedule", st.settings))


def add_routes(app: web.Application) -> None:
    r = app.router
    ops = f"{ADMIN}/function-operations"
    r.add_get(f"{ops}/jobs", list_jobs, name="admin.jobs")
    r.add_get(f"{ops}/jobs/{{jobId}}", job_detail, name="admin.job")
    r.add_post(f"{ops}/jobs/{{jobId}}/stop-retries", stop_retries, name="admin.stop_retries")
    r.add_get(f"{ops}/runs", list_runs, name="admin.runs")
    r.add_get(f"{ADMIN}/function-catalog", catalog_list, name="admin.catalog")
    r.add_get(f"{ADMIN}/function-catalog/binding-summaries", bindings, name="admin.bindings")
    r.add_get(f"{ADMIN}/function-catalog/{{functionId}}", catalog_one, name="admin.function")
    r.add_get(f"{ADMIN}/api-functions", api_functions, name="admin.api_functions")
    r.add_get(f"{ADMIN}/function-schedules", schedules_list, name="admin.schedules")
    r.add_get(f"{ADMIN}/function-schedules/{{scheduleId}}", schedule_one, name="admin.schedule")
