"""POST /v1/deliveries/replay: a range of events to one sink again, with the same ids."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from aiohttp import web

from tests.core.conftest import StartService


class Sinks:
    """One loopback server; each path is a sink, each hit's webhook-id recorded."""

    def __init__(self) -> None:
        self.hits: dict[str, list[str]] = defaultdict(list)
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.hits[request.path].append(request.headers["webhook-id"])
        return web.Response(status=204)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{name}", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = self.runner.addresses[0][1]

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"


async def test_replay_resends_the_range_to_that_sink_only(start_service: StartService) -> None:
    sinks = Sinks()
    await sinks.start()
    try:
        api = await start_service(
            events={
                "retry_schedule_s": [0.2],
                "sinks": [
                    {"name": "a", "url": sinks.url("a"), "signing": "none"},
                    {"name": "b", "url": sinks.url("b"), "signing": "none"},
                ],
            }
        )
        steps = [{"after_s": 0, "status": "Queued"}, {"after_s": 0.1, "status": "Completed"}]
        ids = [await api.script("function_job", steps) for _ in range(3)]
        trackings = [await api.track(kind="function_job", remote_id=rid) for rid in ids]
        for t in trackings:
            await api.wait_terminal(t["tracking_id"])
        status, feed = await api.call("GET", "/v1/events?after=0")
        assert status == 200
        events = feed["events"]
        assert len(events) == 3
        async with asyncio.timeout(20):
            while len(sinks.hits["/a"]) < 3 or len(sinks.hits["/b"]) < 3:
                await asyncio.sleep(0.05)

        # The last two events, by seq, to sink a again: the same ids, b untouched.
        first_seq = events[0]["seq"]
        status, answer = await api.call(
            "POST", "/v1/deliveries/replay", json={"sink": "a", "after_seq": first_seq}
        )
        assert status == 202 and answer == {"replayed": 2}, answer
        async with asyncio.timeout(20):
            while len(sinks.hits["/a"]) < 5:
                await asyncio.sleep(0.05)
        assert sinks.hits["/a"][3:] == [e["id"] for e in events[1:]]
        # By time, from the first event's time on: all three again.
        status, answer = await api.call(
            "POST", "/v1/deliveries/replay", json={"sink": "a", "since": events[0]["time"]}
        )
        assert status == 202 and answer == {"replayed": 3}, answer
        async with asyncio.timeout(20):
            while len(sinks.hits["/a"]) < 8:
                await asyncio.sleep(0.05)
        assert sorted(sinks.hits["/a"][5:]) == sorted(e["id"] for e in events)
        await asyncio.sleep(0.5)
        assert len(sinks.hits["/b"]) == 3

        bad = [
            ({"sink": "nope", "after_seq": 0}, "sink"),
            ({"sink": "a"}, "after_seq"),
            ({"sink": "a", "after_seq": 0, "since": events[0]["time"]}, "since"),
            ({"sink": "a", "until_seq": 5}, "after_seq"),
            ({"sink": "a", "after_seq": 5, "until_seq": 2}, "until_seq"),
            ({"sink": "a", "after_seq": -1}, "after_seq"),
            ({"sink": "a", "since": "yesterday"}, "since"),
            ({"sink": "a", "after_seq": 0, "extra": 1}, "extra"),
        ]
        for body, field in bad:
            status, problem = await api.call("POST", "/v1/deliveries/replay", json=body)
            assert status == 422 and problem["field"] == field, (body, problem)
        assert len(sinks.hits["/a"]) == 8  # nothing half-done by a refused replay

        status, listed = await api.call("GET", "/v1/sinks")
        assert status == 200
        assert [(s["name"], s["disabled"], s["pending"]) for s in listed["items"]] == [
            ("a", False, 0),
            ("b", False, 0),
        ]
        status, answer = await api.call("POST", "/v1/sinks/a/enable")
        assert status == 200 and answer == {"name": "a", "enabled": True, "was_disabled": False}
        status, problem = await api.call("POST", "/v1/sinks/nope/enable")
        assert status == 404 and problem["field"] == "name"
    finally:
        assert sinks.runner is not None
        await sinks.runner.cleanup()
