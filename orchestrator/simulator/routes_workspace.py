"""The workspace API the simulator serves: the runtime routes a caller works with (function
jobs, project builds, entity saves, UI actions) and the admin routes (function operations,
stop-retries, configuration reads).

Status reads are the hot path: a dict lookup, then the bytes cached on the
record until its next phase change (or a settings change).

Entity saves and UI actions start work that no caller is handed an id for. A
record save commits first (its answer carries the save's correlation id, never
a job id), then one job per EntityTrigger binding of the entity is queued with
``Source: Trigger``, its ``TriggerBindingId``, ``EntityId`` and that
``CorrelationId``. A UI action's enqueue is validated while the caller waits
and answers the queued job, with ``Source: Action``, its ``ActionId`` and, for
an entity action, ``EntityId``. Both kinds of job are seen through Function
operations only: the runtime job route answers 404 for them.
"""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
from aiohttp import web

from orchestrator.clock import iso, parse_iso
from orchestrator.simulator import catalog, listing
from orchestrator.simulator.enums import (
    JOB_SOURCE,
    JOB_STATUS,
    NET_BUILD_KIND,
    RUN_STATUS,
    SRC_ACTION,
    SRC_TRIGGER,
    UI_BUILD_KIND,
    WireEnum,
)
from orchestrator.simulator.keys import SIM_ID, STATE
from orchestrator.simulator.listing import Filters
from orchestrator.simulator.model import Build, Job
from orchestrator.simulator.present import (
    BadRequest,
    field,
    json_response,
    opt_str,
    parse_enum,
    present,
    present_list,
    present_view,
    problem,
    query,
    query_limit,
    query_time,
    read_object,
)
from orchestrator.simulator.state import Publication, Refused, SimState, valid_id

T = TypeVar("T")
PROJECTS = {"net-operation-project": "net", "ui-project": "ui"}
BUILD_KINDS = {"net": NET_BUILD_KIND, "ui": UI_BUILD_KIND}


def found(value: T | None, detail: str) -> T:
    """``value``, or the 404 problem with ``detail`` when there is none."""
    if value is None:
        raise Refused(404, detail)
    return value


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
    return web.Response(body=data, content_type="application/json")


def _enveloped(st: SimState, job: Job, now: float) -> web.Response:
    """The enqueue answer: the job's status model in the platform's envelope."""
    model = present_view(job, "job", st.settings, now)
    if st.settings.camel_case:
        return json_response({"succeeded": True, "data": model})
    return json_response({"Succeeded": True, "Data": model})


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
    return _enveloped(st, job, now)


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
        return json_response(present(view.body, "job", st.settings))
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
    return json_response(present_view(build, project, st.settings, now))


async def build_status(request: web.Request) -> web.Response:
    st = request.app[STATE]
    project = PROJECTS[request.match_info["project"]]
    build = st.builds[project].get(request.match_info["buildId"])
    if build is None:
        return problem(404, "No build with this id.")
    return _cached(st, build, project, st.clock())


def _ids(request: web.Request, *names: str) -> list[str]:
    values = [request.match_info[name] for name in names]
    for name, value in zip(names, values, strict=True):
        if not valid_id(value):
            raise BadRequest(f"The {name} is not valid.")
    return values


def _correlation(request: web.Request, body: dict[str, Any], st: SimState) -> str:
    given = opt_str(body, "CorrelationId") or request.headers.get("X-Correlation-Id")
    if given is not None and not valid_id(given):
        raise BadRequest("CorrelationId must match [A-Za-z0-9._:-]{1,200}.")
    return given or st.new_id("corr")


async def save_record(request: web.Request) -> web.Response:
    """``PUT .../entities/{entityName}/records/{entityId}``: the save, then its triggers."""
    st = request.app[STATE]
    entity_name, entity_id = _ids(request, "entityName", "entityId")
    body = await read_object(request, required=True)
    correlation_id = _correlation(request, body, st)
    now = st.clock()
    for binding in catalog.trigger_bindings(entity_name):
        fn = catalog.FUNCTIONS_BY_ID[binding.business_function_id]
        st.enqueue(
            fn.function_key,
            now=now,
            source=SRC_TRIGGER,
            correlation_id=correlation_id,
            trigger_binding_id=binding.binding_id,
            entity_id=entity_id,
            publication=Publication(fn.business_function_id, None),
        )
    answer = {
        "EntityName": entity_name,
        "EntityId": entity_id,
        "CorrelationId": correlation_id,
        "Saved": True,
        "ModifiedAt": iso(now),
    }
    return json_response(present(answer, "record", st.settings))


async def _enqueue_action(
    request: web.Request, action_id: str, entity: tuple[str, str] | None
) -> web.Response:
    st = request.app[STATE]
    action = found(catalog.ACTIONS_BY_ID.get(action_id), "No UI action with this id.")
    body = await read_object(request)
    if action.entity_name is None and entity is not None:
        raise BadRequest("This action is global: enqueue it without a record.")
    if action.entity_name is not None:
        if entity is None:
            raise BadRequest(f"This action runs on a {action.entity_name} record: name one.")
        if entity[0].lower() != action.entity_name.lower():
            raise BadRequest(f"This action runs on {action.entity_name} records, not {entity[0]}.")
    inputs = body.get("Input", body.get("input"))
    if inputs is not None and not isinstance(inputs, dict):
        raise BadRequest("Input must be an object or null.")  # validated while the caller waits
    fn = catalog.FUNCTIONS_BY_ID[action.business_function_id]
    now = st.clock()
    job, _ = st.enqueue(
        fn.function_key,
        now=now,
        source=SRC_ACTION,
        correlation_id=_correlation(request, body, st),
        action_id=action.action_id,
        entity_id=None if entity is None else entity[1],
        publication=Publication(fn.business_function_id, None),
    )
    request[SIM_ID] = job.meta.job_id
    return _enveloped(st, job, now)


async def global_action(request: web.Request) -> web.Response:
    [action_id] = _ids(request, "actionId")
    return await _enqueue_action(request, action_id, None)


async def entity_action(request: web.Request) -> web.Response:
    entity_name, entity_id, action_id = _ids(request, "entityName", "entityId", "actionId")
    return await _enqueue_action(request, action_id, (entity_name, entity_id))


# Admin: function operations and configuration reads.
_NO_JOB = "No function job with this id."


def _filters(request: web.Request, status_enum: WireEnum, route: str) -> Filters:
    """The list's filters, read under the names the profile's OpenAPI declares for
    ``route`` (a parameter it does not declare is ignored, as ASP.NET binding does)."""
    profile = request.app[STATE].profile

    def text(documented: str) -> str | None:
        name = profile.filter_name(route, documented)
        return None if name is None else query(request, name)

    def when(documented: str) -> float | None:
        name = profile.filter_name(route, documented)
        return None if name is None else query_time(request, name)

    def enum(documented: str, enum: WireEnum) -> int | None:
        name = profile.filter_name(route, documented)
        raw = None if name is None else query(request, name)
        return None if raw is None or name is None else parse_enum(enum, raw, name)

    limit = profile.filter_name(route, "Limit")
    return Filters(
        function_id=text("FunctionId"),
        schedule_id=text("ScheduleId"),
        binding_id=text("TriggerBindingId"),
        action_id=text("ActionId"),
        entity_id=text("EntityId"),
        search=text("Search"),
        source=enum("Source", JOB_SOURCE),
        status=enum("Status", status_enum),
        start=when("From"),
        end=when("To"),
        limit=query_limit(request, limit) if limit is not None else 50,
    )


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
    view = found(job.view(st.clock()) if job is not None else None, _NO_JOB)
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
        return problem(404, _NO_JOB)
    result = job.stop_retries(now, expected_at)
    model = present(result.view.body, "job", st.settings)
    if result.status == 409:
        return problem(
            409, result.detail, Status=model.get("Status", model.get("status")), Job=model
        )
    return json_response(model)


async def catalog_list(request: web.Request) -> web.Response:
    rows = [f.body() for f in catalog.FUNCTIONS]
    return json_response(present_list(rows, "function", request.app[STATE].settings))


async def bindings(request: web.Request) -> web.Response:
    rows = [b.body() for b in catalog.BINDINGS]
    return json_response(present_list(rows, "binding", request.app[STATE].settings))


async def api_functions(request: web.Request) -> web.Response:
    rows = [p.body() for p in catalog.PUBLICATIONS]
    return json_response(present_list(rows, "publication", request.app[STATE].settings))


async def catalog_one(request: web.Request) -> web.Response:
    row = catalog.FUNCTIONS_BY_ID.get(request.match_info["functionId"])
    row = found(row, "No function with this BusinessFunctionId.")
    return json_response(present(row.body(), "function", request.app[STATE].settings))


async def legacy_imports(request: web.Request) -> web.Response:
    return json_response({"Items": [], "Total": 0})


async def schedules_list(request: web.Request) -> web.Response:
    st = request.app[STATE]
    now = st.clock()
    rows = [st.schedules.body(s, now) for s in st.schedules.schedules.values()]
    return json_response(present_list(rows, "schedule", st.settings))


async def schedule_one(request: web.Request) -> web.Response:
    st = request.app[STATE]
    schedule = st.schedules.schedules.get(request.match_info["scheduleId"])
    schedule = found(schedule, "No schedule with this id.")
    body = st.schedules.body(schedule, st.clock())
    return json_response(present(body, "schedule", st.settings))
