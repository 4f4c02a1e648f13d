"""A real ``orchestrator serve`` process restarted: a resumed tracking keeps its work class.

Builds of one kind teach the service how long that class takes; a build of the same
class, still running, is resumed after a graceful restart and is read by the adaptive
planner again (``next_poll_reason: "adaptive"``), although its first read after the
restart returns the very bytes read before it (a digest stands for them, so the read
shows nothing of the class).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp

from orchestrator.simulator import start_simulator
from tests.serveproc import ServeProcess, free_port

LEARNED_S = 12.0  # the class's duration: long enough for a restart inside it


def _config(tmp_path: Path, sim_url: str, port: int) -> Path:
    cfg = tmp_path / "orchestrator.toml"
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:{port}"
allow_unauthenticated = true
shutdown_grace_s = 2

[store]
path = "{tmp_path / "orch.db"}"

[polling]
initial_delay_s = 0.05
max_delay_s = 0.3

[polling.adaptive]
min_samples = 5

[logging]
format = "json"
level = "INFO"

[[workspaces]]
name = "default"
base_url = "{sim_url}"
request_timeout_s = 2
"""
    )
    return cfg


async def _build(http: aiohttp.ClientSession, sim: str, ends_s: float) -> str:
    steps = [
        {"after_s": 0, "status": "Queued"},
        {"after_s": 0.1, "status": "Running"},
        {"after_s": ends_s, "status": "Succeeded"},
    ]
    body = {"kind": "net_operation_build", "build_kind": "Build", "steps": steps}
    async with http.post(f"{sim}/_sim/script", json=body) as resp:
        assert resp.status == 201
        return str((await resp.json())["id"])


async def _track(http: aiohttp.ClientSession, base: str, remote_id: str) -> str:
    body = {"kind": "net_operation_build", "remote_id": remote_id, "build_kind": "Build"}
    async with http.post(f"{base}/v1/trackings", json=body) as resp:
        assert resp.status == 201
        return str((await resp.json())["tracking_id"])


async def _get(http: aiohttp.ClientSession, base: str, tracking_id: str) -> dict[str, Any]:
    async with http.get(f"{base}/v1/trackings/{tracking_id}") as resp:
        assert resp.status == 200
        return await resp.json()  # type: ignore[no-any-return]


async def _until(check: Any, timeout_s: float = 40) -> Any:
    async with asyncio.timeout(timeout_s):
        while not (found := await check()):
            await asyncio.sleep(0.05)
        return found


async def test_a_resumed_build_is_planned_by_its_class_after_a_restart(tmp_path: Path) -> None:
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=5)
    port = free_port()
    serve = ServeProcess(_config(tmp_path, sim.url, port), port, tmp_path / "serve.log")
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:
            await serve.start(http)
            taught = [await _track(http, base, await _build(http, sim.url, LEARNED_S))
                      for _ in range(5)]  # fmt: skip

            async def all_ended() -> bool:
                states = [(await _get(http, base, t))["state"] for t in taught]
                return all(s == "terminal" for s in states)

            await _until(all_ended)
            # Long past its class's end: still running after the restart.
            tid = await _track(http, base, await _build(http, sim.url, 120.0))

            async def read_running() -> dict[str, Any] | None:
                t = await _get(http, base, tid)
                return t if t["remote_status"] == "Running" else None

            before = await _until(read_running)
            assert before["next_poll_reason"] == "adaptive"  # the hint and the class's history
            assert serve.terminate() == 0  # graceful: learned durations flushed

            await serve.start(http)

            async def read_again() -> dict[str, Any] | None:
                t = await _get(http, base, tid)
                return t if t["polls"] > before["polls"] else None

            after = await _until(read_again)
            assert after["state"] == "active" and after["remote_status"] == "Running"
            assert after["next_poll_reason"] == "adaptive", serve.tail()
            async with http.get(f"{base}/metrics") as resp:
                metrics = await resp.text()
            assert (
                'orchestrator_work_duration_samples{class="Build",kind="net_operation_build",'
                'workspace="default"} 5.0'
            ) in metrics
            assert serve.terminate() == 0
    finally:
        serve.ensure_dead()
        await sim.close()
