"""Listen first: a real ``orchestrator serve`` with 50,000 stored active trackings
answers liveness, metrics and intake while it loads them, and says how far it is.

The workspace is a stub on loopback whose OpenAPI document answers only when the
test lets it: start-up reads it before the load, so the service is held in its
loading phase for as long as the test needs, with no timing in the assertions.
Every other route answers 503 with a long Retry-After: nothing is polled.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from orchestrator.store.base import NewTracking
from orchestrator.store.sqlite import SqliteStore
from tests.serveproc import ServeProcess, free_port

STORED = 50_000
BATCH = 1_000


@dataclass
class Workspace:
    url: str
    release: asyncio.Event
    asked: asyncio.Event


@pytest.fixture
async def workspace() -> AsyncIterator[Workspace]:
    release, asked = asyncio.Event(), asyncio.Event()

    async def openapi(request: web.Request) -> web.Response:
        asked.set()
        await release.wait()
        return web.Response(status=404)  # the documented fallback enums

    async def busy(request: web.Request) -> web.Response:
        return web.Response(status=503, headers={"Retry-After": "3600"})

    app = web.Application()
    app.router.add_get("/swagger/v1/swagger.json", openapi)
    app.router.add_route("*", "/{tail:.*}", busy)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield Workspace(f"http://127.0.0.1:{port}", release, asked)
    finally:
        release.set()
        await runner.cleanup()


async def _fill(path: Path, count: int) -> list[str]:
    store = SqliteStore(path, synchronous="OFF")
    await store.open()
    now = time.time()
    ids = [f"trk_{int(now * 1000):012x}{n:012x}" for n in range(count)]
    try:
        for start in range(0, count, BATCH):
            items = [
                NewTracking(ids[n], "default", "function_job", f"J-{n}", now + 3600, now, now + 1)
                for n in range(start, min(count, start + BATCH))
            ]
            await store.create_trackings(items)
    finally:
        await store.close()
    return ids


def _config(tmp_path: Path, port: int, workspace: str) -> Path:
    cfg = tmp_path / "orchestrator.toml"
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:{port}"
allow_unauthenticated = true
shutdown_grace_s = 1

[store]
path = "{tmp_path / "orch.db"}"
synchronous = "NORMAL"

[logging]
format = "json"
level = "INFO"

[[workspaces]]
name = "default"
base_url = "{workspace}"
request_timeout_s = 60
max_requests_per_second = 50
"""
    )
    return cfg


async def _until_alive(session: aiohttp.ClientSession, serve: ServeProcess) -> None:
    """Until /healthz answers: the process has started and listens."""
    assert serve.proc is not None
    async with asyncio.timeout(60):
        while True:
            assert serve.proc.poll() is None, serve.tail()
            try:
                async with session.get(f"{serve.url}/healthz") as resp:
                    assert resp.status == 200
                    return
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.02)


def _metric(text: str, name: str) -> float:
    return sum(
        s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name
    )


@pytest.mark.timeout(180)
async def test_the_service_answers_while_it_loads_and_adopts_intake_made_meanwhile(
    tmp_path: Path, workspace: Workspace
) -> None:
    stored = await _fill(tmp_path / "orch.db", STORED)
    port = free_port()
    serve = ServeProcess(_config(tmp_path, port, workspace.url), port, tmp_path / "serve.log")
    async with aiohttp.ClientSession() as session:
        serve.spawn()
        try:
            await _until_alive(session, serve)
            # Held before its load (the workspace's document is not answered yet).
            async with asyncio.timeout(30):
                await workspace.asked.wait()
            async with session.get(f"{serve.url}/readyz") as resp:
                assert resp.status == 503
                body = await resp.json()
            assert body["status"] == "loading"
            assert body["loaded"] < STORED
            async with session.get(f"{serve.url}/metrics") as resp:
                assert resp.status == 200
                text = await resp.text()
            assert _metric(text, "orchestrator_ready") == 0
            assert _metric(text, "process_resident_memory_bytes") > 0

            # Intake while loading: written, answered 201, adopted (documented in api.md).
            new = {"kind": "function_job", "remote_id": "J-during-load"}
            async with session.post(f"{serve.url}/v1/trackings", json=new) as resp:
                assert resp.status == 201, await resp.text()
                made = (await resp.json())["tracking_id"]
            async with session.post(f"{serve.url}/v1/trackings", json=new) as resp:
                assert resp.status == 200  # already tracked: the same one
                assert (await resp.json())["tracking_id"] == made
            # Stored trackings answer queries; caller actions wait for the load.
            async with session.get(f"{serve.url}/v1/trackings/{stored[7]}") as resp:
                assert resp.status == 200
                assert (await resp.json())["state"] == "active"
            async with session.delete(f"{serve.url}/v1/trackings/{stored[7]}") as resp:
                assert resp.status == 503
                assert resp.headers["Retry-After"] == "1"
                assert (await resp.json())["title"] == "Loading"

            workspace.release.set()
            seen: list[dict[str, object]] = []
            async with asyncio.timeout(120):
                while True:
                    async with session.get(f"{serve.url}/readyz") as resp:
                        body = await resp.json()
                        if resp.status == 200:
                            break
                    assert body["status"] == "loading", body
                    seen.append(body)
                    await asyncio.sleep(0.01)
            # Progress only grows, and counts what the store held when the load began.
            loaded = [int(str(b["loaded"])) for b in seen]
            assert loaded == sorted(loaded)
            assert {b["total"] for b in seen} <= {0, STORED + 1}

            async with session.get(f"{serve.url}/metrics") as resp:
                text = await resp.text()
            # Every stored tracking once, and the one taken during the load once.
            assert _metric(text, "orchestrator_trackings_active") == STORED + 1
            assert _metric(text, "orchestrator_resume_loaded") == STORED + 1
            assert _metric(text, "orchestrator_resume_expected") == STORED + 1
            assert _metric(text, "orchestrator_ready") == 1
            async with session.delete(f"{serve.url}/v1/trackings/{stored[7]}") as resp:
                assert resp.status == 200
                assert (await resp.json())["outcome"] == "abandoned"
            assert serve.terminate() == 0, serve.tail()
        finally:
            serve.ensure_dead()


@pytest.mark.timeout(120)
async def test_sigterm_while_loading_exits_0_at_once(tmp_path: Path, workspace: Workspace) -> None:
    await _fill(tmp_path / "orch.db", 1_000)
    port = free_port()
    serve = ServeProcess(_config(tmp_path, port, workspace.url), port, tmp_path / "serve.log")
    async with aiohttp.ClientSession() as session:
        serve.spawn()
        try:
            await _until_alive(session, serve)
            async with asyncio.timeout(30):
                await workspace.asked.wait()
            assert serve.proc is not None
            serve.proc.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(serve.proc.wait, 30) == 0, serve.tail()
            assert "stopped while starting" in serve.tail(20_000)
        finally:
            serve.ensure_dead()
