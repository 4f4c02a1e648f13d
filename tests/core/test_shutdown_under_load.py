"""SIGTERM while every slot holds a read the workspace never answers: the service
drains, cancels what is left, frees every slot and exits 0 (the HTTP client's
threads hold requests of their own; none may outlive the drain or crash the exit)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import orjson

from tests.serveproc import ServeProcess, free_port

IN_FLIGHT = 16


class HoldingWorkspace:
    """Answers the OpenAPI document with 404 (documented enums then), holds every
    status read without an answer; counts connections open now."""

    def __init__(self) -> None:
        self.held = 0
        self.open_now = 0
        self.port = 0
        self.tasks: set[asyncio.Task[None]] = set()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open_now += 1
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if b"/jobs/" not in head.split(b"\r\n", 1)[0]:
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}")
                    await writer.drain()
                    continue
                self.held += 1
                await reader.read()  # until the client goes away
                return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.tasks.discard(task)
            self.open_now -= 1
            writer.close()


def write_config(tmp_path: Path, workspace: int, port: int) -> Path:
    cfg = tmp_path / "orchestrator.toml"
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:{port}"
allow_unauthenticated = true
shutdown_grace_s = 1
shutdown_hard_s = 2

[store]
path = "{tmp_path / "orch.db"}"

[polling]
initial_delay_s = 0.05

[logging]
format = "json"

[[workspaces]]
name = "default"
base_url = "http://127.0.0.1:{workspace}"
max_in_flight = {IN_FLIGHT}
request_timeout_s = 60
"""
    )
    return cfg


async def test_sigterm_with_every_slot_held_exits_0_and_frees_the_slots(tmp_path: Path) -> None:
    ws = HoldingWorkspace()
    server = await asyncio.start_server(ws.serve, "127.0.0.1", 0)
    ws.port = server.sockets[0].getsockname()[1]
    port = free_port()
    serve = ServeProcess(write_config(tmp_path, ws.port, port), port, tmp_path / "serve.log")
    try:
        async with aiohttp.ClientSession() as session:
            await serve.start(session)
            items = [{"kind": "function_job", "remote_id": f"J-{i}"} for i in range(40)]
            async with session.post(
                f"{serve.url}/v1/trackings/batch", json={"items": items}
            ) as resp:
                assert resp.status in (200, 201), await resp.text()
            async with asyncio.timeout(20):
                while ws.held < IN_FLIGHT:
                    await asyncio.sleep(0.05)
        assert serve.proc is not None
        # terminate() waits 30 s at most: far less than the reads' 60 s timeout.
        code = await asyncio.to_thread(serve.terminate)
        async with asyncio.timeout(5):
            while ws.open_now:
                await asyncio.sleep(0.05)
    finally:
        serve.ensure_dead()
        server.close()
        for task in list(ws.tasks):
            task.cancel()
    log = serve.log.read_text(errors="replace")
    assert code == 0, serve.tail()
    assert "Fatal Python error" not in log and "Traceback" not in log, serve.tail()
    lines = [orjson.loads(line) for line in log.splitlines() if line.startswith("{")]
    cancelled = [
        r for r in lines if r.get("msg", r.get("message", "")).startswith("cancelling status reads")
    ]
    assert cancelled and cancelled[0].get("count") == IN_FLIGHT, cancelled
