"""The event log for pull consumers (page feed and SSE) and the deliveries API.

The feed and the stream read the same ordered log (``seq``), each event being
the stored CloudEvent with the ``seq`` extension attribute added.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, cast, get_args

import orjson
from aiohttp import web

from orchestrator.aio import wait_event
from orchestrator.api.models import ReplayBody
from orchestrator.api.problems import invalid, json_response, read_json, validated
from orchestrator.clock import iso
from orchestrator.errors import ApiProblem
from orchestrator.events.cloudevents import CALLBACK, sink_destination
from orchestrator.runtime import RUNTIME, Runtime
from orchestrator.store.base import Delivery, DeliveryState, EventRecord, ReplaySpan

if TYPE_CHECKING:
    from orchestrator.events.delivery import DeliveryService

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
STREAM_BATCH = 500
HEARTBEAT_S = 15.0
# How often an idle stream looks at draining and at its client between events.
STREAM_TICK_S = 1.0
DELIVERY_STATES: tuple[str, ...] = get_args(DeliveryState)


def add_event_routes(app: web.Application) -> None:
    app.router.add_get("/v1/events", list_events)
    app.router.add_get("/v1/events/stream", stream_events)
    app.router.add_get("/v1/deliveries", list_deliveries)
    app.router.add_post("/v1/deliveries/{delivery_id}/retry", retry_delivery)
    app.router.add_post("/v1/deliveries/replay", replay_deliveries)
    app.router.add_get("/v1/sinks", list_sinks)
    app.router.add_post("/v1/sinks/{name}/enable", enable_sink)


SQLITE_MAX_INT = 2**63 - 1


def _int_param(raw: str | None, name: str, default: int, lo: int, hi: int | None = None) -> int:
    if raw is None:
        return default
    text = raw.strip()
    # isdigit() alone accepts "²" and other Unicode digits that int() refuses.
    if not (text.isascii() and text.isdigit()):
        raise _bad_param(name, "must be a non-negative integer")
    value = int(text)
    hi = SQLITE_MAX_INT if hi is None else hi  # larger values overflow the store's integers
    if value < lo or value > hi:
        raise _bad_param(name, f"must be between {lo} and {hi}")
    return value


def _bad_param(name: str, rule: str) -> ApiProblem:
    # 422, as every other validation error of a query or a body.
    return ApiProblem(422, "Invalid parameter", f"{name} {rule}", field=name)


def event_json(record: EventRecord) -> dict[str, Any]:
    event: dict[str, Any] = orjson.loads(record.payload)
    event["seq"] = record.seq
    return event


async def list_events(request: web.Request) -> web.Response:
    runtime = request.app[RUNTIME]
    after = _int_param(request.query.get("after"), "after", 0, 0)
    limit = _int_param(request.query.get("limit"), "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    records = await runtime.store.events_after(after, limit)
    return json_response(
        {
            "events": [event_json(r) for r in records],
            "next_after": records[-1].seq if records else after,
        }
    )


def _start_seq(request: web.Request) -> int:
    last_id = request.headers.get("Last-Event-ID")
    if last_id is not None and last_id.strip():
        # A reconnecting EventSource knows better than the URL it was opened with.
        return _int_param(last_id, "Last-Event-ID", 0, 0)
    return _int_param(request.query.get("after"), "after", 0, 0)


def _sse(record: EventRecord) -> bytes:
    # No "event:" field: every message is the default "message" type, so
    # EventSource.onmessage sees all of them; the type is inside the data.
    return b"id: %d\ndata: %s\n\n" % (record.seq, orjson.dumps(event_json(record)))


def _gone(request: web.Request, runtime: Runtime) -> bool:
    transport = request.transport
    return runtime.draining or transport is None or transport.is_closing()


async def stream_events(request: web.Request) -> web.StreamResponse:
    runtime = request.app[RUNTIME]
    cursor = _start_seq(request)
    resp = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
    )
    await resp.prepare(request)
    loop = asyncio.get_running_loop()
    last_write = loop.time()
    try:
        await resp.write(b": connected\n\n")
        while not _gone(request, runtime):
            # Taken before the read so that a publish during it is not missed.
            woken = runtime.bus.waiter()
            records = await runtime.store.events_after(cursor, STREAM_BATCH)
            if records:
                await resp.write(b"".join(_sse(r) for r in records))
                cursor = records[-1].seq
                last_write = loop.time()
                if len(records) == STREAM_BATCH:
                    continue
            await wait_event(woken, STREAM_TICK_S)
            if loop.time() - last_write >= HEARTBEAT_S and not _gone(request, runtime):
                await resp.write(b": heartbeat\n\n")
                last_write = loop.time()
    except ConnectionResetError:
        log.debug("event stream client went away at seq %d", cursor)
        return resp
    with contextlib.suppress(ConnectionResetError):
        await resp.write_eof()
    return resp


def delivery_json(d: Delivery, runtime: Runtime) -> dict[str, Any]:
    url = d.url
    if url is None and d.destination != CALLBACK:
        for sink in runtime.settings.events.sinks:
            if d.destination == sink_destination(sink.name):
                url = sink.url
    return {
        "delivery_id": d.delivery_id,
        "event_id": d.event_id,
        "event_seq": d.event_seq,
        "destination": d.destination,
        "url": url,
        "state": d.state,
        "attempts": d.attempts,
        "next_attempt_at": iso(d.next_attempt_at) if d.state == "pending" else None,
        "last_status": d.last_status,
        "last_error": d.last_error,
        "created_at": iso(d.created_at),
        "event_time": iso(d.event_time),
        "delivered_at": iso(d.delivered_at),
    }


async def list_deliveries(request: web.Request) -> web.Response:
    runtime = request.app[RUNTIME]
    state = request.query.get("state")
    if state is not None and state not in DELIVERY_STATES:
        raise _bad_param("state", f"must be one of {', '.join(DELIVERY_STATES)}")
    limit = _int_param(request.query.get("limit"), "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    cursor = request.query.get("cursor") or None
    try:
        items, next_cursor = await runtime.store.list_deliveries(
            cast("DeliveryState | None", state), limit, cursor
        )
    except ValueError:
        raise _bad_param("cursor", "is not valid") from None
    return json_response(
        {"items": [delivery_json(d, runtime) for d in items], "next_cursor": next_cursor}
    )


async def retry_delivery(request: web.Request) -> web.Response:
    runtime = request.app[RUNTIME]
    raw = request.match_info["delivery_id"]
    current = None
    if raw.isascii() and raw.isdigit() and int(raw) <= SQLITE_MAX_INT:
        current = await runtime.store.get_delivery(int(raw))
    if current is None:
        raise ApiProblem(404, "Not found", "no such delivery")
    if current.state != "dead":
        raise ApiProblem(
            409,
            "Delivery is not dead",
            f"only a dead delivery can be re-driven; this one is {current.state}",
            extra={"state": current.state},
        )
    redriven = await runtime.store.redrive_delivery(current.delivery_id, runtime.clock.now())
    if redriven is None:
        raise ApiProblem(409, "Delivery is not dead", "the delivery changed state meanwhile")
    # Wakes the delivery workers (and idle streams, which just re-read nothing).
    runtime.bus.publish()
    return json_response(delivery_json(redriven, runtime), status=202)


async def replay_deliveries(request: web.Request) -> web.Response:
    """The events of a seq or time range to one sink again (same ids): 202 {"replayed": K}."""
    runtime = request.app[RUNTIME]
    body = validated(ReplayBody, await read_json(request), object_only=False)
    if body.sink not in {sink.name for sink in runtime.settings.events.sinks}:
        raise invalid("sink", "no sink of that name")
    # The bounds given; ReplaySpan leaves the others open.
    given = body.model_dump(exclude={"sink"}, exclude_none=True)
    span = ReplaySpan(
        **{k: v.timestamp() if k in ("since", "until") else v for k, v in given.items()}
    )
    count = await runtime.store.replay_deliveries(
        sink_destination(body.sink), span, runtime.clock.now()
    )
    runtime.bus.publish()  # the sink's worker claims them now
    return json_response({"replayed": count}, status=202)


def _deliveries(runtime: Runtime) -> DeliveryService:
    if runtime.deliveries is None:
        raise ApiProblem(503, "Not ready", "event delivery has not started")
    return runtime.deliveries


async def list_sinks(request: web.Request) -> web.Response:
    runtime = request.app[RUNTIME]
    counts = await runtime.store.outbox_pending_counts()
    items = _deliveries(runtime).sinks()
    for item in items:
        item["pending"] = counts.get(sink_destination(str(item["name"])), 0)
    return json_response({"items": items})


async def enable_sink(request: web.Request) -> web.Response:
    """A disabled sink back on: what it missed is still pending and goes now."""
    runtime = request.app[RUNTIME]
    name = request.match_info["name"]
    was = await _deliveries(runtime).enable(name)
    if was is None:
        raise ApiProblem(404, "Not found", "no sink of that name", field="name")
    return json_response({"name": name, "enabled": True, "was_disabled": was})
