"""The pull feed and the SSE stream over a real server and a real SQLite store."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from cloudevents.core.bindings.http import HTTPMessage, from_http_event

from orchestrator.api import events_routes
from orchestrator.api.events_routes import add_event_routes
from orchestrator.clock import SystemClock
from orchestrator.config import EventsConfig, Settings
from orchestrator.errors import ApiProblem
from orchestrator.events.bus import EventBus
from orchestrator.events.cloudevents import EventFactory
from orchestrator.metrics import Metrics
from orchestrator.runtime import RUNTIME, Runtime
from orchestrator.store import Finish, NewTracking, SqliteStore, Store


class Feed:
    """A store, an API server on 127.0.0.1 and a way to append events."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.bus = EventBus()
        self.factory = EventFactory(EventsConfig())
        self.runtime = Runtime(
            settings=Settings(),
            store=store,
            clock=SystemClock(),
            metrics=Metrics(),
            bus=self.bus,
        )
        self.base = ""
        self.ids: list[str] = []

    async def emit(self, n: int, notify_all: bool = False) -> None:
        now = time.time()
        items = [
            NewTracking(
                tracking_id=f"trk_{uuid.uuid4().hex}",
                workspace="default",
                kind="net_operation_build",
                remote_id=f"B-{uuid.uuid4().hex}",
                deadline_at=now + 3600,
                created_at=now,
                next_poll_at=now,
            )
            for _ in range(n)
        ]
        finishes = []
        for tracking, _ in await self.store.create_trackings(items):
            done = replace(tracking, state="terminal", outcome="failed", terminal_at=now)
            event = self.factory.terminal(done, now)
            finishes.append(Finish(tracking.tracking_id, "failed", now, None, event))
            self.ids.append(event.event_id)
        assert all(await self.store.finish(finishes))
        self.bus.publish()


@web.middleware
async def problems(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiProblem as p:
        return web.json_response(p.to_body(), status=p.status)


@pytest.fixture
async def feed(tmp_path: Path) -> AsyncIterator[Feed]:
    store = SqliteStore(tmp_path / "orchestrator.db")
    await store.open()
    f = Feed(store)
    app = web.Application(middlewares=[problems])
    app[RUNTIME] = f.runtime
    add_event_routes(app)
    runner = web.AppRunner(app, shutdown_timeout=2)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    f.base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield f
    finally:
        f.runtime.draining = True
        await runner.cleanup()
        await store.close()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def read_feed(http: aiohttp.ClientSession, base: str, limit: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after = 0
    for _ in range(1000):
        async with http.get(f"{base}/v1/events", params={"after": after, "limit": limit}) as r:
            assert r.status == 200
            page = await r.json()
        if not page["events"]:
            assert page["next_after"] == after
            return out
        out.extend(page["events"])
        after = page["next_after"]
        assert after == page["events"][-1]["seq"]
    raise AssertionError("feed did not end")


class Stream:
    """A minimal SSE client: frames as (id, data, comments seen before it)."""

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self.resp = resp
        self.comments = 0

    async def next(self, timeout_s: float = 20.0) -> tuple[int, dict[str, Any]] | None:
        fields: dict[str, str] = {}
        async with asyncio.timeout(timeout_s):
            while True:
                raw = await self.resp.content.readline()
                if not raw:
                    return None  # the server ended the stream
                line = raw.decode().rstrip("\n")
                if line.startswith(":"):
                    self.comments += 1
                elif line:
                    name, _, value = line.partition(":")
                    fields[name] = value.removeprefix(" ")
                elif "data" in fields:
                    return int(fields["id"]), orjson.loads(fields["data"])

    async def take(self, n: int) -> list[tuple[int, dict[str, Any]]]:
        out = []
        for _ in range(n):
            frame = await self.next()
            assert frame is not None
            out.append(frame)
        return out


@contextlib.asynccontextmanager
async def stream(http: aiohttp.ClientSession, base: str, **kw: Any) -> AsyncIterator[Stream]:
    async with http.get(f"{base}/v1/events/stream", **kw) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        yield Stream(resp)


def as_cloudevent(item: dict[str, Any]) -> Any:
    body = orjson.dumps(item)
    return from_http_event(
        HTTPMessage(headers={"content-type": "application/cloudevents+json"}, body=body)
    )


async def test_feed_pages_the_log_in_order(feed: Feed, http: aiohttp.ClientSession) -> None:
    await feed.emit(25)
    events = await read_feed(http, feed.base, limit=7)
    assert [e["id"] for e in events] == feed.ids
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs))
    for item in events:
        event = as_cloudevent(item)
        assert event.get_extension("seq") == item["seq"]
        assert event.get_type() == "com.moltaro.orchestrator.tracking.failed"
        assert event.get_data()["tracking_id"] == event.get_subject()


async def test_feed_and_stream_list_the_same_ids_in_order(
    feed: Feed, http: aiohttp.ClientSession
) -> None:
    await feed.emit(10)
    async with stream(http, feed.base) as s:
        first = await s.take(10)
        await feed.emit(5)  # live: published while the stream is open
        live = await s.take(5)
    frames = first + live
    events = await read_feed(http, feed.base, limit=1000)
    assert [f[1]["id"] for f in frames] == [e["id"] for e in events] == feed.ids
    assert [f[0] for f in frames] == [f[1]["seq"] for f in frames] == [e["seq"] for e in events]


async def test_stream_resumes_from_last_event_id_without_gaps_or_repeats(
    feed: Feed, http: aiohttp.ClientSession
) -> None:
    await feed.emit(8)
    async with stream(http, feed.base) as s:
        before = await s.take(3)
    await feed.emit(4)  # while the client is away
    last_id = str(before[-1][0])
    # The header wins over ?after=, as for a reconnecting EventSource.
    async with stream(
        http, feed.base, params={"after": "0"}, headers={"Last-Event-ID": last_id}
    ) as s:
        after = await s.take(9)
    seen = [f[1]["id"] for f in before + after]
    assert seen == feed.ids
    async with stream(http, feed.base, params={"after": str(after[-1][0])}) as s:
        await feed.emit(1)
        (tail,) = await s.take(1)
    assert tail[1]["id"] == feed.ids[-1]


async def test_stream_ends_cleanly_when_draining(feed: Feed, http: aiohttp.ClientSession) -> None:
    await feed.emit(1)
    async with stream(http, feed.base) as s:
        await s.take(1)
        feed.runtime.draining = True
        assert await s.next() is None


async def test_idle_stream_sends_heartbeats(
    feed: Feed, http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(events_routes, "STREAM_TICK_S", 0.05)
    monkeypatch.setattr(events_routes, "HEARTBEAT_S", 0.1)
    async with stream(http, feed.base) as s:
        await feed.emit(1)
        await s.take(1)
        line = await asyncio.wait_for(s.resp.content.readline(), 10)
        assert line == b": heartbeat\n"
        await feed.emit(1)  # and events still flow after it
        await s.take(1)


@pytest.mark.parametrize(
    ("path", "params", "headers", "field"),
    [
        ("/v1/events", {"after": "-1"}, {}, "after"),
        ("/v1/events", {"after": "x"}, {}, "after"),
        ("/v1/events", {"limit": "0"}, {}, "limit"),
        ("/v1/events", {"limit": "1001"}, {}, "limit"),
        ("/v1/events/stream", {"after": "1.5"}, {}, "after"),
        ("/v1/events/stream", {}, {"Last-Event-ID": "abc"}, "Last-Event-ID"),
        ("/v1/deliveries", {"limit": "5000"}, {}, "limit"),
    ],
)
async def test_bad_parameters_are_problems_naming_the_field(
    feed: Feed,
    http: aiohttp.ClientSession,
    path: str,
    params: dict[str, str],
    headers: dict[str, str],
    field: str,
) -> None:
    async with http.get(feed.base + path, params=params, headers=headers) as r:
        assert r.status == 422
        assert (await r.json())["field"] == field


async def test_empty_feed(feed: Feed, http: aiohttp.ClientSession) -> None:
    async with http.get(f"{feed.base}/v1/events", params={"after": "42"}) as r:
        assert await r.json() == {"events": [], "next_after": 42}
