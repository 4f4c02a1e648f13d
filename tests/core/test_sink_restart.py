"""A disabled sink stays disabled across restarts of a real ``orchestrator serve``, and
the other sink hears of each change through the operational events."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from cloudevents.core.bindings.http import HTTPMessage, from_http_event
from standardwebhooks import Webhook

from orchestrator.simulator import start_simulator
from tests.core.test_restart import write_config
from tests.serveproc import ServeProcess, free_port

SECRET = "whsec_" + base64.b64encode(b"restart-sink-secret-32-bytes!!!!").decode()
SINK_TYPES = ("com.moltaro.orchestrator.sink.disabled", "com.moltaro.orchestrator.sink.enabled")


class Sinks:
    """``/a`` answers 410 while ``gone``; ``/b`` always 204. Every request is kept."""

    def __init__(self) -> None:
        self.gone = True
        self.hits: dict[str, list[Any]] = {"/a": [], "/b": []}
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        headers = dict(request.headers)
        Webhook(SECRET).verify(body, headers)
        self.hits[request.path].append(from_http_event(HTTPMessage(headers=headers, body=body)))
        return web.Response(status=410 if request.path == "/a" and self.gone else 204)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{sink}", self.handle)
        self.runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = self.runner.addresses[0][1]

    def types(self, path: str) -> list[str]:
        return [e.get_type() for e in self.hits[path]]

    def ids(self, path: str) -> set[str]:
        return {e.get_id() for e in self.hits[path]}


async def _until(check: Any, timeout_s: float = 20) -> None:
    async with asyncio.timeout(timeout_s):
        while not await check():
            await asyncio.sleep(0.05)


async def test_a_disabled_sink_stays_disabled_across_restarts_until_enabled(
    tmp_path: Path,
) -> None:
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=7)
    sinks = Sinks()
    await sinks.start()
    port = free_port()
    cfg = write_config(tmp_path, sim.url, port)
    cfg.write_text(
        cfg.read_text()
        + f"""
[events]
delivery_timeout_s = 1
retry_schedule_s = [0.1]

[[events.sinks]]
name = "a"
url = "http://127.0.0.1:{sinks.port}/a"
secret_env = "SINK_SECRET"

[[events.sinks]]
name = "b"
url = "http://127.0.0.1:{sinks.port}/b"
secret_env = "SINK_SECRET"
"""
    )
    serve = ServeProcess(cfg, port, tmp_path / "serve.log", env={"SINK_SECRET": SECRET})
    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as http:

        async def track() -> str:
            steps = [{"after_s": 0, "status": "Queued"}, {"after_s": 0.1, "status": "Completed"}]
            async with http.post(
                f"{sim.url}/_sim/script", json={"kind": "function_job", "steps": steps}
            ) as resp:
                rid = (await resp.json())["id"]
            async with http.post(
                f"{base}/v1/trackings", json={"kind": "function_job", "remote_id": rid}
            ) as resp:
                assert resp.status == 201
                return str((await resp.json())["tracking_id"])

        async def sink_a() -> dict[str, Any]:
            async with http.get(f"{base}/v1/sinks") as resp:
                items = (await resp.json())["items"]
            return next(s for s in items if s["name"] == "a")

        async def gauge() -> str:
            async with http.get(f"{base}/metrics") as resp:
                text = await resp.text()
            return next(
                line.split()[-1]
                for line in text.splitlines()
                if line.startswith('orchestrator_sink_disabled{sink="a"}')
            )

        try:
            await serve.start(http)
            first = await track()
            await _until(lambda: _has(sinks.types("/b"), SINK_TYPES[0]))
            before = await sink_a()
            assert before["disabled"] and "410" in before["disabled_reason"]

            serve.kill()  # SIGKILL: what was committed is all there is
            await serve.start(http)
            after = await sink_a()
            assert after["disabled"] is True
            assert after["disabled_since"] == before["disabled_since"]
            assert after["disabled_reason"] == before["disabled_reason"]
            assert await gauge() == "1.0"
            second = await track()
            await _until(lambda: _subject_at(sinks, "/b", second))
            await asyncio.sleep(0.5)  # several retry periods
            assert len(sinks.hits["/a"]) == 1  # the one 410; nothing since, restart or not
            assert sinks.types("/b").count(SINK_TYPES[0]) == 1  # not announced again

            sinks.gone = False
            async with http.post(f"{base}/v1/sinks/a/enable") as resp:
                assert (await resp.json())["was_disabled"] is True
            await _until(lambda: _subject_at(sinks, "/a", second))
            await _until(lambda: _has(sinks.types("/b"), SINK_TYPES[1]))
            assert await gauge() == "0.0"
            assert serve.terminate() == 0
            await serve.start(http)
            assert (await sink_a())["disabled"] is False
            assert await gauge() == "0.0"

            # Sink a got what it missed (both trackings' events), never its own news.
            assert {e.get_subject() for e in sinks.hits["/a"]} == {first, second}
            assert not set(sinks.types("/a")) & set(SINK_TYPES)
            async with http.get(f"{base}/v1/events?after=0") as resp:
                feed = (await resp.json())["events"]
            ops = [e for e in feed if e["type"] in SINK_TYPES]
            assert [e["type"] for e in ops] == list(SINK_TYPES)
            assert all(e["subject"] == "a" and isinstance(e["seq"], int) for e in ops)
            assert all(e["source"] == "urn:moltaro-orchestrator:sinks" for e in ops)
            b_ops = [e for e in sinks.hits["/b"] if e.get_type() in SINK_TYPES]
            assert [e.get_id() for e in b_ops] == [e["id"] for e in ops]  # one id each
            assert serve.terminate() == 0
        finally:
            serve.ensure_dead()
            assert sinks.runner is not None
            await sinks.runner.cleanup()
            await sim.close()


async def _has(types: list[str], wanted: str) -> bool:
    return wanted in types


async def _subject_at(sinks: Sinks, path: str, subject: str) -> bool:
    return any(e.get_subject() == subject for e in sinks.hits[path])
