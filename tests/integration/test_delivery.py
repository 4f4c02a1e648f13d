"""Delivery workers against real sink servers on 127.0.0.1 and a real SQLite store.

Every request a sink receives is verified with the ``standardwebhooks`` package
and parsed with the ``cloudevents`` SDK.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from cloudevents.core.bindings.http import HTTPMessage, from_http_event
from standardwebhooks import Webhook

from orchestrator.api.events_routes import add_event_routes
from orchestrator.clock import SystemClock
from orchestrator.config import EventsConfig, Settings, SinkConfig
from orchestrator.errors import ApiProblem
from orchestrator.events.bus import EventBus
from orchestrator.events.cloudevents import EventFactory
from orchestrator.events.delivery import DeliveryService
from orchestrator.metrics import Metrics
from orchestrator.runtime import RUNTIME, Runtime
from orchestrator.store import (
    Delivery,
    Finish,
    MemoryStore,
    NewEvent,
    NewTracking,
    SqliteStore,
    Store,
)

SINK_SECRET = "whsec_" + base64.b64encode(b"sink-secret-of-32-bytes-exactly!").decode()
CALLBACK_SECRET = "whsec_" + base64.b64encode(b"callback-secret-32-bytes-long!!!").decode()


# -- a sink server ------------------------------------------------------------------------


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    hang_s: float = 0.0


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def event_id(self) -> str:
        return self.headers["webhook-id"]


Responder = Callable[[Hit, int], Reply]  # (hit, how many earlier hits this event had)


class Sink:
    def __init__(self, respond: Responder | None = None) -> None:
        self.respond: Responder = respond or (lambda hit, n: Reply())
        self.hits: list[Hit] = []
        self.release = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self, port: int = 0) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port, reuse_address=True)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        self.release.set()
        if self._runner is not None:
            await self._runner.cleanup()

    def url(self, path: str = "/hooks") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def by_event(self, path: str = "/hooks") -> dict[str, list[Hit]]:
        out: dict[str, list[Hit]] = {}
        for hit in self.hits:
            if hit.path == path:
                out.setdefault(hit.event_id, []).append(hit)
        return out

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        hit = Hit(request.path, dict(request.headers), body, time.time())
        earlier = sum(
            1
            for h in self.hits
            if h.headers.get("webhook-id") == hit.headers.get("webhook-id") and h.path == hit.path
        )
        self.hits.append(hit)
        reply = self.respond(hit, earlier)
        if reply.hang_s:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.release.wait(), reply.hang_s)
        return web.Response(status=reply.status, headers=reply.headers)


def verify(hit: Hit, secret: str) -> Any:
    """Signature, content type and CloudEvent shape of one received request."""
    assert hit.headers["Content-Type"] == "application/cloudevents+json"
    Webhook(secret).verify(hit.body, hit.headers)
    event = from_http_event(HTTPMessage(headers=hit.headers, body=hit.body))
    assert event.get_id() == hit.headers["webhook-id"]
    assert event.get_specversion() == "1.0"
    return event


# -- fixtures and helpers -------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = SqliteStore(tmp_path / "orchestrator.db")
    await s.open()
    yield s
    await s.close()


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    s = Sink()
    await s.start()
    yield s
    await s.stop()


def events_config(*sinks: SinkConfig, **over: Any) -> EventsConfig:
    base: dict[str, Any] = {
        "retry_schedule_s": [0.05, 0.1],
        "delivery_timeout_s": 2.0,
        "callback_allowlist": ["http://127.0.0.1:"],
        "sinks": list(sinks),
    }
    base.update(over)
    return EventsConfig(**base)


class Harness:
    def __init__(self, store: Store, events: EventsConfig, secrets: dict[str, str]) -> None:
        self.store = store
        self.events = events
        self.bus = EventBus()
        self.metrics = Metrics()
        self.clock = SystemClock()
        self.factory = EventFactory(events)
        # Callbacks are allowed (events_config), so they need a secret too.
        secrets = {"callback": CALLBACK_SECRET, **secrets}
        self.service = DeliveryService(
            store, events, self.metrics, self.clock, self.bus, secrets=secrets
        )

    async def emit(self, n: int, callback_url: str | None = None) -> list[NewEvent]:
        now = time.time()
        items = [
            NewTracking(
                tracking_id=f"trk_{uuid.uuid4().hex}",
                workspace="default",
                kind="function_job",
                remote_id=f"J-{uuid.uuid4().hex}",
                deadline_at=now + 3600,
                created_at=now,
                next_poll_at=now,
                callback_url=callback_url,
            )
            for _ in range(n)
        ]
        finishes = []
        for tracking, created in await self.store.create_trackings(items):
            assert created
            done = replace(
                tracking, state="terminal", outcome="succeeded", terminal_at=now, result={}
            )
            event = self.factory.terminal(done, now)
            finishes.append(Finish(tracking.tracking_id, "succeeded", now, result={}, event=event))
        assert all(await self.store.finish(finishes))
        self.bus.publish()
        return [f.event for f in finishes]

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        task = asyncio.create_task(self.service.run(), name="test:deliveries")
        try:
            yield
        finally:
            self.service.stop(grace_s=1.0)
            await asyncio.wait_for(task, 15)

    async def states(self) -> dict[str, list[str]]:
        """Delivery states by event id."""
        items: list[Delivery] = []
        cursor: str | None = None
        out: dict[str, list[str]] = {}
        while True:
            page, cursor = await self.store.list_deliveries(None, 1000, cursor)
            items.extend(page)
            if cursor is None:
                break
        for d in items:
            out.setdefault(d.event_id, []).append(d.state)
        return out

    def sample(self, name: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(name, labels)
        return value or 0.0


async def until(check: Callable[[], Awaitable[bool]], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def all_in(h: Harness, state: str, count: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        states = await h.states()
        return sum(s.count(state) for s in states.values()) == count

    return check


# -- tests ------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "memory"])
async def test_every_event_reaches_every_sink_and_callback_signed(
    backend: str, tmp_path: Path, sink: Sink
) -> None:
    store: Store = SqliteStore(tmp_path / "o.db") if backend == "sqlite" else MemoryStore()
    await store.open()
    try:
        cfg = events_config(
            SinkConfig(name="signed", url=sink.url("/signed"), secret_env="X_SINK"),
            SinkConfig(name="plain", url=sink.url("/plain"), signing="none"),
        )
        h = Harness(store, cfg, {"sink:signed": SINK_SECRET, "callback": CALLBACK_SECRET})
        async with h.running():
            events = await h.emit(15) + await h.emit(5, callback_url=sink.url("/cb"))
            await until(all_in(h, "delivered", 15 * 2 + 5 * 3))
            await until(lambda: _gauge_zero(h))

        payloads = {e.event_id: e.payload for e in events}
        signed, plain, cb = sink.by_event("/signed"), sink.by_event("/plain"), sink.by_event("/cb")
        assert set(signed) == set(plain) == set(payloads)
        assert set(cb) == {e.event_id for e in events[15:]}
        for hits in signed.values():
            for hit in hits:
                event = verify(hit, SINK_SECRET)
                assert hit.body == payloads[event.get_id()]
        for hits in cb.values():
            for hit in hits:
                verify(hit, CALLBACK_SECRET)
        for hits in plain.values():
            assert all("webhook-signature" not in hit.headers for hit in hits)

        assert (
            h.sample("orchestrator_event_deliveries_total", sink="signed", result="delivered") == 20
        )
        assert (
            h.sample("orchestrator_event_deliveries_total", sink="callback", result="delivered")
            == 5
        )
        assert h.sample("orchestrator_event_delivery_latency_seconds_count", sink="plain") == 20
        label_values = {
            s.labels.get("sink")
            for m in h.metrics.registry.collect()
            for s in m.samples
            if "sink" in s.labels
        }
        assert label_values == {"signed", "plain", "callback"}
    finally:
        await store.close()


async def _gauge_zero(h: Harness) -> bool:
    return (
        all(
            h.sample("orchestrator_event_outbox_pending", sink=s) == 0
            for s in ("signed", "plain", "callback")
        )
        and (await h.store.outbox_pending_counts()) == {}
    )


async def test_sink_down_then_up_gets_every_event_with_stable_id_and_body(
    store: Store,
) -> None:
    port = free_port()
    sink = Sink()
    cfg = events_config(
        SinkConfig(name="main", url=f"http://127.0.0.1:{port}/hooks", secret_env="X"),
        delivery_timeout_s=0.3,
    )
    h = Harness(store, cfg, {"sink:main": SINK_SECRET})

    async def refused_twice() -> bool:
        pending, _ = await store.list_deliveries("pending", 1000, None)
        return len(pending) == 12 and all(d.attempts >= 2 for d in pending)

    def flaky(hit: Hit, earlier: int) -> Reply:
        # first a hang past the attempt timeout, then a 500, then a 503 without
        # Retry-After, then success
        return [Reply(hang_s=2.0), Reply(500), Reply(503), Reply()][min(earlier, 3)]

    try:
        async with h.running():
            events = await h.emit(12)
            await until(refused_twice)  # connection refused while the sink is down
            sink.respond = flaky
            await sink.start(port)
            await until(all_in(h, "delivered", 12))
    finally:
        await sink.stop()

    by_event = sink.by_event()
    assert set(by_event) == {e.event_id for e in events}
    payloads = {e.event_id: e.payload for e in events}
    for event_id, hits in by_event.items():
        assert len(hits) >= 4
        for hit in hits:
            assert verify(hit, SINK_SECRET).get_id() == event_id
            assert hit.body == payloads[event_id]
    delivered, _ = await store.list_deliveries("delivered", 1000, None)
    assert all(d.attempts >= 6 and d.last_status == 200 for d in delivered)
    assert h.sample("orchestrator_event_deliveries_total", sink="main", result="retry") >= 12 * 5


async def test_410_disables_the_sink_until_enabled_and_it_then_gets_what_it_missed(
    store: Store, sink: Sink
) -> None:
    gone = [True]

    def respond(hit: Hit, earlier: int) -> Reply:
        return Reply(410 if hit.path == "/a" and gone[0] else 200)

    sink.respond = respond
    cfg = events_config(
        SinkConfig(name="a", url=sink.url("/a"), secret_env="X"),
        SinkConfig(name="b", url=sink.url("/b"), secret_env="X"),
        retry_schedule_s=[0.05],
    )
    h = Harness(store, cfg, {"sink:a": SINK_SECRET, "sink:b": SINK_SECRET})
    async with h.running(), api(h) as base, aiohttp.ClientSession() as http:
        first = await h.emit(1)
        await until(lambda: _sampled(h, "orchestrator_sink_disabled", 1.0, sink="a"))
        later = await h.emit(4)
        await until(lambda: _types_at(sink, "/b", 6))  # 5 tracking events + sink.disabled
        await asyncio.sleep(0.5)  # many retry periods: nothing more reaches sink a
        assert len(sink.by_event("/a")) == 1  # the one 410, nothing after it
        pending, _ = await store.list_deliveries("pending", 100, None)
        assert len(pending) == 5 and {d.destination for d in pending} == {"sink:a"}
        async with http.get(f"{base}/v1/sinks") as r:
            [state] = [s for s in (await r.json())["items"] if s["name"] == "a"]
        assert state["disabled"] and "410" in str(state["disabled_reason"])
        assert state["pending"] == 5 and "410" in str(state["last_error"])
        async with http.post(f"{base}/v1/sinks/nope/enable") as r:
            assert r.status == 404
        gone[0] = False
        async with http.post(f"{base}/v1/sinks/a/enable") as r:
            assert (await r.json())["was_disabled"] is True
        await until(all_in(h, "delivered", 12))  # a's 5, b's 5 + disabled + enabled
        async with http.post(f"{base}/v1/sinks/a/enable") as r:
            assert (await r.json())["was_disabled"] is False
    a = sink.by_event("/a")
    assert set(a) == {e.event_id for e in first + later}  # what it missed, same ids
    assert h.sample("orchestrator_sink_disabled", sink="a") == 0.0
    assert h.sample("orchestrator_sink_disabled", sink="b") == 0.0
    # Sink b heard of both changes, signed like every event; a heard of neither.
    ops = [verify(hit, SINK_SECRET) for hit in sink.hits if hit.path == "/b"]
    ops = [e for e in ops if e.get_type().startswith("com.moltaro.orchestrator.sink.")]
    assert [e.get_type() for e in ops] == [
        "com.moltaro.orchestrator.sink.disabled",
        "com.moltaro.orchestrator.sink.enabled",
    ]
    disabled, enabled = ops
    assert disabled.get_source() == "urn:moltaro-orchestrator:sinks"
    assert disabled.get_subject() == enabled.get_subject() == "a"
    data = disabled.get_data()
    assert data["name"] == "a" and data["disabled"] is True and data["pending"] >= 1
    assert "410" in data["disabled_reason"] and "410" in data["last_error"]
    assert data["disabled_since"] == state["disabled_since"]
    assert enabled.get_data()["disabled"] is False and enabled.get_data()["pending"] == 5
    # In the log, once each, with no tracking: the feed lists them too.
    log = [r for r in await store.events_after(0, 100) if r.tracking_id is None]
    assert [r.event_id for r in log] == [disabled.get_id(), enabled.get_id()]
    assert all(r.sink == "sink:a" for r in log)


async def _types_at(sink: Sink, path: str, n: int) -> bool:
    return len(sink.by_event(path)) >= n


async def test_a_callback_410_stops_only_that_event(store: Store, sink: Sink) -> None:
    sink.respond = lambda hit, earlier: Reply(410)
    h = Harness(store, events_config(), {})
    async with h.running():
        await h.emit(2, callback_url=sink.url("/cb"))
        await until(all_in(h, "dead", 2))
    dead, _ = await store.list_deliveries("dead", 10, None)
    assert {d.destination for d in dead} == {"callback"} and len(sink.hits) == 2


async def test_a_sink_without_success_for_disable_after_s_is_disabled(
    store: Store, sink: Sink
) -> None:
    sink.respond = lambda hit, earlier: Reply(500)
    cfg = events_config(
        SinkConfig(name="a", url=sink.url("/a"), secret_env="X"),
        retry_schedule_s=[0.1],
        disable_after_s=0.6,
    )
    h = Harness(store, cfg, {"sink:a": SINK_SECRET})
    async with h.running():
        await h.emit(1)
        started = time.monotonic()
        await until(lambda: _sampled(h, "orchestrator_sink_disabled", 1.0, sink="a"))
        took = time.monotonic() - started
        hits = len(sink.hits)
        await asyncio.sleep(0.5)
        assert len(sink.hits) == hits  # disabled: no more attempts
    assert took >= 0.6 - 0.05 and hits >= 3
    [state] = h.service.sinks()
    assert "no successful delivery for 0.6 s" in str(state["disabled_reason"])
    # Alone, it has no other sink to tell: the event is in the log (the feed) only.
    [record] = await store.events_after(1, 10)
    assert record.type == "com.moltaro.orchestrator.sink.disabled" and record.sink == "sink:a"
    assert orjson.loads(record.payload)["data"]["disabled_reason"] == state["disabled_reason"]
    assert await store.outbox_pending_counts() == {"sink:a": 1}


def _sampled(h: Harness, name: str, value: float, **labels: str) -> Awaitable[bool]:
    async def check() -> bool:
        return h.sample(name, **labels) == value

    return check()


async def test_429_and_503_retry_after_is_respected(store: Store, sink: Sink) -> None:
    first: dict[str, Reply] = {}

    def respond(hit: Hit, earlier: int) -> Reply:
        return first[hit.event_id] if earlier == 0 else Reply()

    sink.respond = respond
    cfg = events_config(SinkConfig(name="main", url=sink.url(), secret_env="X"))
    h = Harness(store, cfg, {"sink:main": SINK_SECRET})
    seconds, date = await h.emit(1), await h.emit(1)
    when = format_datetime(datetime.fromtimestamp(int(time.time()) + 2, UTC), usegmt=True)
    first[seconds[0].event_id] = Reply(429, {"Retry-After": "1"})
    first[date[0].event_id] = Reply(503, {"Retry-After": when})
    async with h.running():
        await until(all_in(h, "delivered", 2))

    hits = sink.by_event()
    s1, s2 = hits[seconds[0].event_id]
    assert s2.at - s1.at >= 1.0 - 0.01  # tolerance only for clock granularity
    d1, d2 = hits[date[0].event_id]
    assert d2.at >= parsedate_to_datetime(when).timestamp() - 0.01
    for hit in (s1, s2, d1, d2):
        verify(hit, SINK_SECRET)


async def test_redirects_are_not_followed(store: Store, sink: Sink) -> None:
    sink.respond = lambda hit, n: (
        Reply(307, {"Location": sink.url("/elsewhere")}) if hit.path == "/hooks" else Reply()
    )
    cfg = events_config(SinkConfig(name="main", url=sink.url(), secret_env="X", max_age_s=0.5))
    h = Harness(store, cfg, {"sink:main": SINK_SECRET})
    async with h.running():
        await h.emit(2)
        await until(all_in(h, "dead", 2))

    assert sink.by_event("/elsewhere") == {}
    dead, _ = await store.list_deliveries("dead", 100, None)
    assert all(d.last_status == 307 and d.attempts >= 2 for d in dead)


@contextlib.asynccontextmanager
async def api(h: Harness) -> AsyncIterator[str]:
    @web.middleware
    async def problems(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiProblem as p:
            return web.json_response(
                p.to_body(), status=p.status, content_type="application/problem+json"
            )

    app = web.Application(middlewares=[problems])
    app[RUNTIME] = Runtime(
        settings=Settings(events=h.events),
        store=h.store,
        clock=h.clock,
        metrics=h.metrics,
        bus=h.bus,
        deliveries=h.service,
    )
    add_event_routes(app)
    runner = web.AppRunner(app, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def test_dead_delivery_redriven_through_the_api_arrives(store: Store, sink: Sink) -> None:
    healthy = False
    sink.respond = lambda hit, n: Reply(200 if healthy else 500)
    cfg = events_config(SinkConfig(name="main", url=sink.url(), secret_env="X", max_age_s=0.3))
    h = Harness(store, cfg, {"sink:main": SINK_SECRET})
    async with h.running(), api(h) as base, aiohttp.ClientSession() as http:
        (event,) = await h.emit(1)
        await until(all_in(h, "dead", 1))

        async with http.get(f"{base}/v1/deliveries", params={"state": "dead"}) as r:
            assert r.status == 200
            listed = await r.json()
        (item,) = listed["items"]
        assert listed["next_cursor"] is None
        assert item["event_id"] == event.event_id and item["state"] == "dead"
        assert item["destination"] == "sink:main" and item["last_status"] == 500
        assert item["url"] == sink.url() and item["next_attempt_at"] is None
        assert SINK_SECRET not in str(listed)

        healthy = True
        async with http.post(f"{base}/v1/deliveries/{item['delivery_id']}/retry") as r:
            assert r.status == 202
            assert (await r.json())["state"] == "pending"
        await until(all_in(h, "delivered", 1))
        async with http.post(f"{base}/v1/deliveries/{item['delivery_id']}/retry") as r:
            assert r.status == 409
            assert r.content_type == "application/problem+json"
        async with http.post(f"{base}/v1/deliveries/999999/retry") as r:
            assert r.status == 404
        async with http.get(f"{base}/v1/deliveries", params={"state": "lost"}) as r:
            assert r.status == 422 and (await r.json())["field"] == "state"
        async with http.get(f"{base}/v1/deliveries", params={"cursor": "%%%"}) as r:
            assert r.status == 422 and (await r.json())["field"] == "cursor"
        async with http.get(f"{base}/v1/deliveries", params={"state": "delivered"}) as r:
            (done,) = (await r.json())["items"]
            assert done["delivered_at"] is not None and done["last_status"] == 200

    last = sink.by_event()[event.event_id][-1]
    assert verify(last, SINK_SECRET).get_id() == event.event_id
    assert last.body == event.payload


async def test_stop_is_bounded_and_leaves_the_delivery_due(store: Store, sink: Sink) -> None:
    sink.respond = lambda hit, n: Reply(hang_s=60)
    cfg = events_config(
        SinkConfig(name="main", url=sink.url(), signing="none"), delivery_timeout_s=30
    )
    h = Harness(store, cfg, {})
    task = asyncio.create_task(h.service.run())
    await h.emit(1)
    await until(lambda: _hits(sink, 1))
    h.service.stop(grace_s=0.2)
    await asyncio.wait_for(task, 10)  # far below the 30 s attempt timeout
    (pending,), _ = await store.list_deliveries("pending", 10, None)
    assert pending.attempts == 0  # the lease, not a recorded failure, brings it back


async def _hits(sink: Sink, n: int) -> bool:
    return len(sink.hits) >= n


async def test_sink_removed_from_configuration_drains_to_dead(store: Store, sink: Sink) -> None:
    old = Harness(store, events_config(SinkConfig(name="old", url=sink.url(), signing="none")), {})
    await old.emit(2)  # never delivered: the service is not running
    h = Harness(store, events_config(SinkConfig(name="new", url=sink.url(), signing="none")), {})
    async with h.running():
        await until(all_in(h, "dead", 2))
    dead, _ = await store.list_deliveries("dead", 10, None)
    assert {d.destination for d in dead} == {"sink:old"}
    assert sink.hits == []


async def test_attempt_lost_with_its_process_is_redelivered_after_the_lease(
    store: Store, sink: Sink
) -> None:
    cfg = events_config(SinkConfig(name="main", url=sink.url(), secret_env="X"))
    h = Harness(store, cfg, {"sink:main": SINK_SECRET})
    (event,) = await h.emit(1)
    # A previous process claimed it and died mid-attempt: nothing was recorded.
    (claimed,) = await store.claim_deliveries("sink:main", time.time(), 10, lease_s=0.5)
    async with h.running():
        await until(all_in(h, "delivered", 1))
    (hit,) = sink.by_event()[event.event_id]
    assert hit.at >= claimed.next_attempt_at - 0.01  # not before the lease ran out
    assert verify(hit, SINK_SECRET).get_id() == event.event_id and hit.body == event.payload


async def test_a_429_503_502_504_throttles_the_whole_sink(store: Store, sink: Sink) -> None:
    """Nothing goes to a sink that said 503 Retry-After before it passes: not the
    event that got the answer, not the events committed meanwhile."""
    hits_before: list[float] = []

    def respond(hit: Hit, earlier: int) -> Reply:
        if not hits_before:
            hits_before.append(hit.at)
            return Reply(503, {"Retry-After": "2"})
        return Reply()

    sink.respond = respond
    cfg = events_config(SinkConfig(name="main", url=sink.url(), secret_env="X"))
    h = Harness(store, cfg, {"sink:main": SINK_SECRET})
    first = await h.emit(1)
    async with h.running():

        async def answered() -> bool:
            return bool(hits_before)

        await until(answered)
        later = await h.emit(3)
        h.bus.publish()
        await until(all_in(h, "delivered", 4))
    throttled_at = hits_before[0]
    after = [hit for hit in sink.hits if hit.at > throttled_at]
    assert {hit.event_id for hit in after} == {e.event_id for e in first + later}
    assert all(hit.at >= throttled_at + 2.0 - 0.01 for hit in after), [
        round(hit.at - throttled_at, 3) for hit in after
    ]


async def test_a_binary_mode_sink_gets_ce_headers_and_the_data_signed(
    store: Store, sink: Sink
) -> None:
    cfg = events_config(SinkConfig(name="bin", url=sink.url("/bin"), secret_env="X", mode="binary"))
    h = Harness(store, cfg, {"sink:bin": SINK_SECRET})
    async with h.running():
        [sent] = await h.emit(1)
        await until(all_in(h, "delivered", 1))
    [hit] = sink.hits
    structured = orjson.loads(sent.payload)
    assert hit.headers["Content-Type"] == "application/json"
    assert orjson.loads(hit.body) == structured["data"]  # the data alone is the body
    assert hit.headers["ce-id"] == structured["id"] == hit.headers["webhook-id"]
    assert hit.headers["ce-type"] == structured["type"]
    assert hit.headers["ce-source"] == structured["source"]  # ':' needs no encoding
    # The signature covers the body sent, checked by the official library.
    Webhook(SINK_SECRET).verify(hit.body, hit.headers)
    # And the CloudEvents SDK reads it as a binary-mode event.
    event = from_http_event(HTTPMessage(headers=hit.headers, body=hit.body))
    assert event.get_id() == structured["id"]
    assert event.get_type() == structured["type"]
    assert event.get_subject() == structured["subject"]
    assert event.get_data() == structured["data"]
