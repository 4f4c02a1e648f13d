"""The ``/_sim/`` control API: settings, faults, scripted timelines, schedules, request log."""

from __future__ import annotations

import gc
from dataclasses import replace
from typing import Any

from aiohttp import web

from orchestrator.simulator import catalog
from orchestrator.simulator.cron import Cron, CronError
from orchestrator.simulator.enums import CONTRACT, JOB_SOURCE
from orchestrator.simulator.faults import FaultRuleError, parse_rules
from orchestrator.simulator.keys import SIM_ID, STATE
from orchestrator.simulator.model import JobMeta
from orchestrator.simulator.present import (
    BadRequest,
    field,
    json_response,
    opt_bool,
    opt_str,
    parse_enum,
    present,
    present_view,
    problem,
    read_object,
)
from orchestrator.simulator.profiles import (
    Profile,
    build_behaviour_with,
    builtin_profiles,
    job_behaviour_with,
)
from orchestrator.simulator.routes_workspace import BUILD_KINDS, found
from orchestrator.simulator.schedules import Schedule
from orchestrator.simulator.scripted import ScriptedBuild, ScriptedJob, ScriptError
from orchestrator.simulator.state import Publication, valid_id

_SCRIPT_KINDS = {
    "function_job": ("job", "/api/workspace/functions/jobs/{}"),
    "net_operation_build": ("net", "/api/workspace/admin/net-operation-project/builds/{}"),
    "workspace_ui_build": ("ui", "/api/workspace/admin/ui-project/builds/{}"),
}


async def reset(request: web.Request) -> web.Response:
    request.app[STATE].reset()
    return json_response({"reset": True})


_SETTINGS = ("camel_case", "enums_as_names", "request_log")


def _settings_body(request: web.Request) -> dict[str, Any]:
    st = request.app[STATE]
    values = (st.settings.camel_case, st.settings.enums_as_names, st.log.enabled)
    return dict(zip(_SETTINGS, values, strict=True))


async def get_settings(request: web.Request) -> web.Response:
    return json_response(_settings_body(request))


async def put_settings(request: web.Request) -> web.Response:
    st = request.app[STATE]
    body = await read_object(request, required=True)
    unknown = set(body) - set(_SETTINGS)
    if unknown:
        raise BadRequest(f"Unknown setting {sorted(unknown)[0]!r}.")
    values = {k: opt_bool(body, k) for k in body}
    if values.get("camel_case") is not None:
        st.settings.camel_case = bool(values["camel_case"])
    if values.get("enums_as_names") is not None:
        st.settings.enums_as_names = bool(values["enums_as_names"])
    if values.get("request_log") is not None:
        st.log.enabled = bool(values["request_log"])
    st.settings.version += 1
    return json_response(_settings_body(request))


async def get_faults(request: web.Request) -> web.Response:
    return json_response({"rules": [r.as_json() for r in request.app[STATE].faults.rules]})


async def put_faults(request: web.Request) -> web.Response:
    st = request.app[STATE]
    try:
        rules = parse_rules(await read_object(request, required=True))
    except FaultRuleError as exc:
        raise BadRequest(str(exc)) from None
    st.faults.replace(rules, st.clock())
    return json_response({"rules": [r.as_json() for r in rules]})


async def script(request: web.Request) -> web.Response:
    st = request.app[STATE]
    body = await read_object(request, required=True)
    kind = body.get("kind")
    if kind not in _SCRIPT_KINDS:
        raise BadRequest(f"kind must be one of {sorted(_SCRIPT_KINDS)}.")
    short, url = _SCRIPT_KINDS[kind]
    rid = body.get("id")
    if rid is not None and (not isinstance(rid, str) or not valid_id(rid)):
        raise BadRequest("id must match [A-Za-z0-9._:-]{1,200}.")
    if rid is not None and (rid in st.jobs or st.find_build(rid) is not None):
        return problem(409, f"The id {rid!r} is already in use.")
    now = st.clock()
    try:
        if short == "job":
            key = _function_key(body.get("function_key") or "scripted.job")
            meta = JobMeta(
                job_id=rid or st.new_id("job"),
                function_key=key,
                business_function_id=_function_id(key),
                created_at=now,
                correlation_id=opt_str(body, "correlation_id"),
                # As the platform: null unless a publication declares it.
                timeout_seconds=_seconds(body, "timeout_seconds", None),
                max_attempts=_int(body.get("max_attempts", 3), "max_attempts", 1, 100),
                retry_delay_s=float(_seconds(body, "retry_delay_s", 5) or 0),
            )
            st.add_job(ScriptedJob(meta, body.get("steps"), st.new_id))
            rid = meta.job_id
        else:
            raw_kind = body.get("build_kind", "Build")
            build_kind = parse_enum(BUILD_KINDS[short], raw_kind, "build_kind")
            rid = rid or st.new_id("bld")
            st.builds[short][rid] = ScriptedBuild(rid, short, build_kind, now, body.get("steps"))
    except ScriptError as exc:
        raise BadRequest(str(exc)) from None
    request[SIM_ID] = rid
    return json_response({"id": rid, "kind": kind, "status_url": url.format(rid)}, status=201)


def _int(value: object, name: str, lo: int, hi: int, or_else: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise BadRequest(f"{name} must be an integer from {lo} to {hi}{or_else}.")
    return value


def _seconds(body: dict[str, Any], name: str, default: int | None) -> int | None:
    value = body.get(name, default)
    return None if value is None else _int(value, name, 0, 86400, " or null")


def _function_key(key: object) -> str:
    if not isinstance(key, str) or not valid_id(key):
        raise BadRequest("function_key must be a valid function key.")
    return key


def _function_id(key: str) -> str:
    row = catalog.FUNCTIONS_BY_KEY.get(key)
    return row.business_function_id if row is not None else catalog.ad_hoc_function_id(key)


async def create_job(request: web.Request) -> web.Response:
    """Enqueue as any source would (trigger, action, test...): for discovery and admin tests."""
    st = request.app[STATE]
    body = await read_object(request, required=True)
    key = opt_str(body, "FunctionKey")
    if key is None or not valid_id(key):
        raise BadRequest("FunctionKey is required.")
    raw_source = field(body, "Source")
    source = parse_enum(JOB_SOURCE, 0 if raw_source is None else raw_source, "Source")
    job, _ = st.enqueue(
        key,
        now=st.clock(),
        source=source,
        correlation_id=opt_str(body, "CorrelationId"),
        dedup_key=opt_str(body, "DeduplicationKey"),
        schedule_id=opt_str(body, "ScheduleId"),
        trigger_binding_id=opt_str(body, "TriggerBindingId"),
        # Triggers, actions and tests run functions that have no API publication.
        publication=Publication(_function_id(key), None),
    )
    request[SIM_ID] = job.meta.job_id
    return json_response(present_view(job, "job", st.settings, st.clock()), status=201)


async def create_jobs_bulk(request: web.Request) -> web.Response:
    """Enqueue ``count`` jobs of one function key through the API path in one call.

    The benchmark needs 100,000 jobs; one HTTP enqueue each would spend most of
    its set-up time in HTTP. Behaviour comes from the current profile (set it
    first with ``PUT /_sim/profile``).
    """
    st = request.app[STATE]
    body = await read_object(request, required=True)
    count = _int(body.get("count"), "count", 1, 200_000)
    key = _function_key(body.get("function_key", "bench.job"))
    now = st.clock()
    # 100,000 long-lived jobs: the collector need not walk them now or later
    # (a full collection over them stalled every request for ~0.15-0.25 s).
    gc.disable()
    try:
        ids = [st.enqueue(key, now=now)[0].meta.job_id for _ in range(count)]
    finally:
        gc.enable()
        gc.freeze()
    return json_response({"ids": ids}, status=201)


async def requests_log(request: web.Request) -> web.Response:
    """``?id=``: the requests naming that id; without it, every request in order."""
    rid = request.query.get("id")
    if rid == "":
        raise BadRequest("The id query parameter, when given, must not be empty.")
    return json_response({"requests": request.app[STATE].log.requests(rid)})


async def stats(request: web.Request) -> web.Response:
    st = request.app[STATE]
    return json_response({**st.log.stats(), **st.describe()})


async def create_schedule(request: web.Request) -> web.Response:
    st = request.app[STATE]
    body = await read_object(request, required=True)
    sid = opt_str(body, "ScheduleId") or st.new_id("sch")
    if not valid_id(sid):
        raise BadRequest("ScheduleId must match [A-Za-z0-9._:-]{1,200}.")
    if sid in st.schedules.schedules:
        return problem(409, f"The schedule {sid!r} already exists.")
    fid, key = opt_str(body, "BusinessFunctionId"), opt_str(body, "FunctionKey")
    row = catalog.FUNCTIONS_BY_ID.get(fid or "") or catalog.FUNCTIONS_BY_KEY.get(key or "")
    if row is None and key is None:
        raise BadRequest("BusinessFunctionId of a catalog function, or a FunctionKey, is required.")
    enabled = opt_bool(body, "Enabled")
    key = row.function_key if row else (key or "")
    schedule = Schedule(
        schedule_id=sid,
        business_function_id=row.business_function_id if row else catalog.ad_hoc_function_id(key),
        function_key=key,
        cron=_cron(body),
        time_zone=_zone(body),
        enabled=True if enabled is None else enabled,
        valid_target=row is None
        or (row.contract == CONTRACT.value("Job") and row.scope == "Global"),
    )
    now = st.clock()
    st.schedules.add(schedule, now)
    return json_response(present(st.schedules.body(schedule, now), "schedule", st.settings), 201)


def _cron(body: dict[str, Any]) -> Cron:
    text = opt_str(body, "Cron")
    if text is None:
        raise BadRequest("Cron is required.")
    try:
        return Cron.parse(text)
    except CronError as exc:
        raise BadRequest(f"Cron: {exc}") from None


def _zone(body: dict[str, Any]) -> str:
    zone = opt_str(body, "TimeZone") or "UTC"
    try:
        Cron.parse("* * * * *").next_after(0, zone)
    except (ValueError, KeyError):
        raise BadRequest(f"Unknown TimeZone {zone!r}.") from None
    return zone


async def patch_schedule(request: web.Request) -> web.Response:
    st = request.app[STATE]
    schedule = st.schedules.schedules.get(request.match_info["scheduleId"])
    body = await read_object(request, required=True)
    schedule = found(schedule, "No schedule with this id.")
    enabled = opt_bool(body, "Enabled")
    if enabled is not None:
        schedule.enabled = enabled
    if field(body, "Cron") is not None:
        schedule.cron = _cron(body)
    if field(body, "TimeZone") is not None:
        schedule.time_zone = _zone(body)
    now = st.clock()
    st.schedules.update(schedule, now)
    return json_response(present(st.schedules.body(schedule, now), "schedule", st.settings))


async def delete_schedule(request: web.Request) -> web.Response:
    gone = request.app[STATE].schedules.remove(request.match_info["scheduleId"])
    found(gone, "No schedule with this id.")
    return web.Response(status=204)


async def get_profile(request: web.Request) -> web.Response:
    st = request.app[STATE]
    p = st.profile
    return json_response(
        {"name": p.name, "job": _plain(p.job), "build": _plain(p.build), **st.describe()}
    )


def _plain(obj: Any) -> dict[str, Any]:
    out = {}
    for name in obj.__dataclass_fields__:
        value = getattr(obj, name)
        out[name] = [value.lo, value.hi] if hasattr(value, "lo") else value
        if isinstance(value, tuple):
            out[name] = list(value)
    return out


async def put_profile(request: web.Request) -> web.Response:
    """Switch profile by name and/or override its default job and build behaviour.

    Overriding ``job`` or ``build`` drops the per-key and per-kind overrides, so
    that what was asked for applies to every job or build created afterwards.
    """
    st = request.app[STATE]
    body = await read_object(request, required=True)
    unknown = set(body) - {"name", "job", "build"}
    if unknown:
        raise BadRequest(f"Unknown field {sorted(unknown)[0]!r}.")
    profile: Profile = st.profile
    name = body.get("name")
    if name is not None:
        named = builtin_profiles().get(name) if isinstance(name, str) else None
        if named is None:
            raise BadRequest(f"name must be one of {sorted(builtin_profiles())}.")
        profile = named
        st.log.enabled = profile.request_log
    for part in ("job", "build"):
        if body.get(part) is not None and not isinstance(body[part], dict):
            raise BadRequest(f"{part} must be an object.")
    try:
        if body.get("job") is not None:
            job = job_behaviour_with(profile.job, body["job"])
            profile = replace(profile, job=job, jobs_by_key={})
        if body.get("build") is not None:
            build = build_behaviour_with(profile.build, body["build"])
            profile = replace(profile, build=build, builds_by_kind={})
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    st.profile = profile
    return await get_profile(request)
