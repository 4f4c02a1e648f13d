"""Administrative routes: function operations (jobs, runs, stop-retries) and configuration reads."""

from __future__ import annotations

from aiohttp import web

from orchestrator.clock import parse_iso
from orchestrator.simulator import catalog, listing
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
from orchestrator.simulator.listing import Filters
from orchestrator.simulator.present import json_response, present, present_list, problem

ADMIN = "/api/workspace/admin"


def _filters(request: web.Request, status_enum: WireEnum, route: str) -> Filters:
    """The list's filters, read under the names the profile's OpenAPI declares for
    ``route`` (a parameter it does not declare is ignored, as ASP.NET binding does)."""
    profile = request.app[STATE].profile

    def named(documented: str) -> str | None:
        return profile.filter_name(route, documented)

    def text(documented: str) -> str | None:
        name = named(documented)
        return None if name is None else query(request, name)

    def when(documented: str) -> float | None:
        name = named(documented)
        return None if name is None else query_time(request, name)

    limit = named("Limit")
    return Filters(
        function_id=text("FunctionId"),
        schedule_id=text("ScheduleId"),
        binding_id=text("TriggerBindingId"),
        action_id=text("ActionId"),
        entity_id=text("EntityId"),
        search=text("Search"),
        source=_enum(request, named("Source"), JOB_SOURCE),
        status=_enum(request, named("Status"), status_enum),
        start=when("From"),
        end=when("To"),
        limit=query_limit(request, name=limit) if limit is not None else 50,
    )


def _enum(request: web.Request, name: str | None, enum: WireEnum) -> int | None:
    if name is None:
        return None
    text = query(request, name)
    if text is None:
        return None
    value = enum.parse(text)
    if value is None:
        raise BadRequest(f"{name} must be one of {[n for n, _ in enum.members]}.")
    return value


async def list_jobs(request: web.Request) -> web.Response:
    st = request.app[STATE]
    items, total = listing.list_jobs(st, _filters(request, JOB_STATUS, "jobs"), st.clock())
    return json_response(present_list(items, "job", st.settings, total))


async def list_runs(request: web.Request) -> web.Response:
    st = request.app[STATE]
    rows, total = listing.list_runs(st, _filters(request, RUN_STATUS, "runs"), st.clock())
    return json_response(present_list(rows, "run", st.settings, total))


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
