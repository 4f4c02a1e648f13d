"""Work that no caller is handed an id for: entity saves that start trigger jobs, UI actions.

A record save commits first (its answer carries the save's correlation id, never
a job id), then one job per EntityTrigger binding of the entity is queued with
``Source: Trigger``, its ``TriggerBindingId``, ``EntityId`` and that
``CorrelationId``. A UI action's enqueue is validated while the caller waits
and answers the queued job, with ``Source: Action``, its ``ActionId`` and, for
an entity action, ``EntityId``. Both kinds of job are seen through Function
operations only: the runtime job route answers 404 for them.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from orchestrator.clock import iso
from orchestrator.simulator import catalog
from orchestrator.simulator.bodies import BadRequest, opt_str, read_object
from orchestrator.simulator.enums import SRC_ACTION, SRC_TRIGGER
from orchestrator.simulator.keys import SIM_ID, STATE
from orchestrator.simulator.present import json_response, present, problem
from orchestrator.simulator.routes_runtime import envelope
from orchestrator.simulator.state import Publication, SimState, valid_id

_JSON = "application/json"


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


def _function(function_id: str) -> catalog.FunctionRow:
    return catalog.FUNCTIONS_BY_ID[function_id]


async def save_record(request: web.Request) -> web.Response:
    """``PUT .../entities/{entityName}/records/{entityId}``: the save, then its triggers."""
    st = request.app[STATE]
    entity_name, entity_id = _ids(request, "entityName", "entityId")
    body = await read_object(request, required=True)
    correlation_id = _correlation(request, body, st)
    now = st.clock()
    for binding in catalog.trigger_bindings(entity_name):
        fn = _function(binding.business_function_id)
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
    action = catalog.ACTIONS_BY_ID.get(action_id)
    if action is None:
        return problem(404, "No UI action with this id.")
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
    fn = _function(action.business_function_id)
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
    view = job.view(now)
    model = present(view.body, "job", st.settings) if view is not None else {}
    return web.Response(body=orjson.dumps(envelope(st, model)), content_type=_JSON)


async def global_action(request: web.Request) -> web.Response:
    [action_id] = _ids(request, "actionId")
    return await _enqueue_action(request, action_id, None)


async def entity_action(request: web.Request) -> web.Response:
    entity_name, entity_id, action_id = _ids(request, "entityName", "entityId", "actionId")
    return await _enqueue_action(request, action_id, (entity_name, entity_id))


def add_routes(app: web.Application) -> None:
    r = app.router
    record = "/api/workspace/entities/{entityName}/records/{entityId}"
    r.add_put(record, save_record, name="work.save_record")
    r.add_post(f"{record}/actions/{{actionId}}/enqueue", entity_action, name="work.entity_action")
    r.add_post("/api/workspace/actions/{actionId}/enqueue", global_action, name="work.action")
