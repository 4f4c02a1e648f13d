"""Terminal events end to end: a real serve process, a real sink, SIGKILL in between."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from cloudevents.core.bindings.http import HTTPMessage, from_http_event
from standardwebhooks import Webhook

from orchestrator.simulator import start_simulator
from tests.core.conftest import Api
from tests.core.test_restart import write_config
from tests.serveproc import ServeProcess, free_port

SECRET = "whsec_" + base64.b64encode(b"e2e-sink-secret-32-bytes-long!!!").decode()


class HangingSink:
    """Hangs every request until ``healthy`` is set, then answers 204."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.healthy = asyncio.Event()
        self.first = asyncio.Event()
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.received.append(({k.lower(): v for k, v in request.headers.items()}, body))
        self.first.set()
        await self.healthy.wait()
        return web.Response(status=204)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/hooks", self.handle)
        self.runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def close(self) -> None:
        self.healthy.set()
        assert self.runner is not None
        await self.runner.cleanup()


async def test_sigkill_between_terminal_and_delivery_redelivers_same_event(tmp_path: Path) -> None:
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=5)
    sink = HangingSink()
    await sink.start()
    port = free_port()
    cfg = write_config(tmp_path, sim.url, port)
    cfg.write_text(
        cfg.read_text()
        + f"""
[events]
delivery_timeout_s = 1
retry_schedule_s = [0.2, 0.5]

[[events.sinks]]
name = "default"
url = "http://127.0.0.1:{sink.port}/hooks"
secret_env = "E2E_SINK_SECRET"
"""
    )
    serve = ServeProcess(cfg, port, tmp_path / "serve.log", env={"E2E_SINK_SECRET": SECRET})
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            await serve.start(session)
            async with session.post(
                f"{sim.url}/_sim/script",
                json={
                    "kind": "function_job",
                    "steps": [
                        {"after_s": 0, "status": "Queued"},
                        {"after_s": 0.1, "status": "Completed"},
                    ],
                },
            ) as resp:
                rid = (await resp.json())["id"]
            async with session.post(
                f"{base}/v1/trackings", json={"kind": "function_job", "remote_id": rid}
            ) as resp:
                assert resp.status == 201
                tracking_id = (await resp.json())["tracking_id"]
            # The terminal transition is committed and the first attempt is in flight.
            await asyncio.wait_for(sink.first.wait(), 20)
            serve.kill()
            first_headers, first_body = sink.received[0]
            sink.healthy.set()
            await serve.start(session)
            async with asyncio.timeout(30):
                while True:
                    async with session.get(f"{base}/v1/deliveries?state=delivered") as resp:
                        if (await resp.json())["items"]:
                            break
                    await asyncio.sleep(0.1)
            ids = {h["webhook-id"] for h, _ in sink.received}
            assert ids == {first_headers["webhook-id"]}
            assert all(body == first_body for _, body in sink.received)
            for headers, body in sink.received:
                Webhook(SECRET).verify(body, headers)
                event = from_http_event(HTTPMessage(headers=headers, body=body))
                assert event.get_type() == "com.moltaro.orchestrator.tracking.succeeded"
                assert event.get_subject() == tracking_id
            async with session.get(f"{base}/v1/events?after=0") as resp:
                feed = (await resp.json())["events"]
            terminal = [e for e in feed if e["subject"] == tracking_id]
            assert [e["id"] for e in terminal] == [first_headers["webhook-id"]]
            assert serve.terminate() == 0
    finally:
        if serve.proc and serve.proc.poll() is None:
            serve.proc.kill()
        await sink.close()
        await sim.close()


async def _sse_ids(url: str, after_header: str | None, count: int) -> list[int]:
    headers = {"Last-Event-ID": after_header} if after_header else {}
    seqs: list[int] = []
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as resp:
        assert resp.status == 200
        assert resp.content_type == "text/event-stream"
        async with asyncio.timeout(20):
            async for raw in resp.content:
                line = raw.decode().strip()
                if line.startswith("id:"):
                    seqs.append(int(line[3:].strip()))
                    if len(seqs) == count:
                        break
    return seqs


async def test_status_changed_events_in_order_and_sse_matches_feed(api: Api) -> None:
    rid = await api.script(
        "function_job",
        [
            {"after_s": 0, "status": "Queued"},
            {"after_s": 0.2, "status": "Leased"},
            {"after_s": 0.5, "status": "Completed"},
        ],
    )
    quiet = await api.script(
        "function_job",
        [{"after_s": 0, "status": "Queued"}, {"after_s": 0.3, "status": "Completed"}],
    )
    t = await api.track(kind="function_job", remote_id=rid, notify="all")
    q = await api.track(kind="function_job", remote_id=quiet)
    await api.wait_terminal(t["tracking_id"])
    await api.wait_terminal(q["tracking_id"])
    status, feed = await api.call("GET", "/v1/events?after=0&limit=100")
    assert status == 200
    events: list[dict[str, Any]] = feed["events"]
    mine = [e["type"].rsplit(".", 1)[1] for e in events if e["subject"] == t["tracking_id"]]
    assert mine == ["status_changed", "status_changed", "succeeded"]
    statuses = [e["data"]["remote_status"] for e in events if e["subject"] == t["tracking_id"]]
    assert statuses == ["Queued", "Leased", "Completed"]
    theirs = [e["type"] for e in events if e["subject"] == q["tracking_id"]]
    assert theirs == ["com.moltaro.orchestrator.tracking.succeeded"]
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(set(e["id"] for e in events)) == len(events)

    stream = f"{api.url}/v1/events/stream?after=0"
    assert await _sse_ids(stream, None, len(seqs)) == seqs
    # Resuming from Last-Event-ID: no gap, no repeat.
    assert await _sse_ids(stream, str(seqs[1]), len(seqs) - 2) == seqs[2:]
    body = orjson.dumps(events[0])
    assert b'"specversion":"1.0"' in body
