"""A group's event as a sink receives it: signed (Standard Webhooks), parsed by the
CloudEvents SDK, with the sealing call's trace context; and the same on SSE."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import orjson
import pytest
from aiohttp import web
from cloudevents.core.bindings.http import HTTPMessage, from_http_event
from standardwebhooks import Webhook

from orchestrator.client import OrchestratorClient
from tests.core.conftest import StartService

SECRET = "whsec_" + base64.b64encode(b"group-sink-secret-32-bytes-long!").decode()
CALLER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
BOUND_S = 30.0


async def test_the_group_event_is_signed_parsed_and_streamed(
    start_service: StartService, monkeypatch: pytest.MonkeyPatch
) -> None:
    received: list[tuple[dict[str, str], bytes]] = []

    async def hook(request: web.Request) -> web.Response:
        received.append(({k.lower(): v for k, v in request.headers.items()}, await request.read()))
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hooks", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    monkeypatch.setenv("GROUP_SINK_SECRET", SECRET)
    try:
        sink = {"name": "default", "url": f"http://127.0.0.1:{port}/hooks",
                "secret_env": "GROUP_SINK_SECRET"}  # fmt: skip
        api = await start_service(events={"sinks": [sink], "retry_schedule_s": [0.2]})
        steps = [{"after_s": 0, "status": "Queued"}, {"after_s": 0.1, "status": "Completed"}]
        job = await api.script("function_job", steps)
        body = {"runtime_result": {"FollowUpOperationIds": [job]}}
        status, answer = await api.call(
            "POST", "/v1/trackings/follow-ups", json=body, headers={"traceparent": CALLER}
        )
        assert status == 200, answer
        name = answer["group"]

        def group_hits() -> list[tuple[dict[str, str], bytes]]:
            return [(h, b) for h, b in received if b'"com.moltaro.orchestrator.group.' in b]

        async with asyncio.timeout(BOUND_S):
            while not group_hits():
                await asyncio.sleep(0.02)
        [(headers, raw)] = group_hits()
        Webhook(SECRET).verify(raw, headers)
        event = from_http_event(HTTPMessage(headers=headers, body=raw))
        assert event.get_type() == "com.moltaro.orchestrator.group.completed"
        assert event.get_subject() == name
        assert event.get_source() == "urn:moltaro-orchestrator:groups"
        data: Any = orjson.loads(raw)["data"]
        assert data["outcomes"]["succeeded"] == 1 and data["not_succeeded"] == []
        assert orjson.loads(raw)["traceparent"] == CALLER
        # The delivery attempt carries a traceparent in the caller's trace.
        assert headers["traceparent"].split("-")[1] == CALLER.split("-")[1]

        seen: list[dict[str, Any]] = []
        async with (
            asyncio.timeout(BOUND_S),
            api.session.get(api.url + "/v1/events/stream?after=0") as resp,
        ):
            async for line in resp.content:
                if line.startswith(b"data: "):
                    seen.append(orjson.loads(line[6:]))
                    if seen[-1]["type"].startswith("com.moltaro.orchestrator.group."):
                        break
        assert seen[-1]["id"] == headers["webhook-id"] and seen[-1]["subject"] == name
        # The Python client reads it from the feed as a group, not as a tracking.
        async with OrchestratorClient(api.url, session=api.session) as orch:
            page = await orch.events(after=0, limit=1000)
        [grouped] = [e for e in page.events if e.group is not None]
        assert grouped.data is None and grouped.outcome is None and grouped.sink is None
        assert grouped.group is not None and grouped.group.all_succeeded
    finally:
        await runner.cleanup()
