"""A sink disabled by one replica is disabled on every replica, and enabled likewise,
without a restart (NOTIFY, with the delivery workers' refresh as the fallback).

Two ``orchestrator serve`` replicas on one PostgreSQL database deliver to sink
``a`` (410 while gone) and ``b``: whichever replica meets the 410 disables
``a``; both then show it disabled and neither sends it anything; an enable
through the other replica turns it back on for both, and ``b`` hears of each
change exactly once.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from orchestrator.simulator import start_simulator
from tests.core.test_sink_restart import SECRET, SINK_TYPES, Sinks
from tests.integration.test_replicas import NAMES, write_config
from tests.serveproc import ServeProcess, free_port

pytestmark = pytest.mark.slow

SINKS_TOML = """
[events]
delivery_timeout_s = 1
retry_schedule_s = [0.1]

[[events.sinks]]
name = "a"
url = "http://127.0.0.1:{port}/a"
secret_env = "SINK_SECRET"

[[events.sinks]]
name = "b"
url = "http://127.0.0.1:{port}/b"
secret_env = "SINK_SECRET"
"""


async def _until(what: str, check: Any, timeout_s: float = 30) -> None:
    try:
        async with asyncio.timeout(timeout_s):
            while not await check():
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"never: {what}") from None


async def test_a_sink_disabled_by_one_replica_is_disabled_on_every_replica(
    tmp_path: Path, postgres_dsn: str
) -> None:
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=23)
    sinks = Sinks()
    await sinks.start()
    replicas = []
    for i in range(2):
        port = free_port()
        cfg = write_config(tmp_path / f"r{i}.toml", sim.url, port, NAMES[i])
        cfg.write_text(cfg.read_text() + SINKS_TOML.format(port=sinks.port))
        env = {"ORCH_STORE__URL": postgres_dsn, "SINK_SECRET": SECRET}
        replicas.append(ServeProcess(cfg, port, tmp_path / f"r{i}.log", env))
    http = aiohttp.ClientSession()

    async def track(replica: ServeProcess) -> str:
        steps = [{"after_s": 0, "status": "Queued"}, {"after_s": 0.1, "status": "Completed"}]
        async with http.post(
            f"{sim.url}/_sim/script", json={"kind": "function_job", "steps": steps}
        ) as resp:
            rid = (await resp.json())["id"]
        async with http.post(
            f"{replica.url}/v1/trackings", json={"kind": "function_job", "remote_id": rid}
        ) as resp:
            assert resp.status == 201
            return str((await resp.json())["tracking_id"])

    async def a_disabled(replica: ServeProcess) -> bool:
        async with http.get(f"{replica.url}/v1/sinks") as resp:
            items = (await resp.json())["items"]
        return bool(next(s for s in items if s["name"] == "a")["disabled"])

    async def everywhere(disabled: bool) -> bool:
        return all([await a_disabled(r) == disabled for r in replicas])

    async def at(path: str, subject: str) -> bool:
        return any(e.get_subject() == subject for e in sinks.hits[path])

    try:
        for replica in replicas:
            await replica.start(http)
        first = await track(replicas[0])
        await _until("a disabled on both replicas", lambda: everywhere(True))
        assert len(sinks.hits["/a"]) == 1  # the one 410
        second = await track(replicas[1])
        await _until("b has the second event", lambda: at("/b", second))
        await asyncio.sleep(1)  # several retry periods of either replica
        assert len(sinks.hits["/a"]) == 1  # nothing to a from either replica

        sinks.gone = False
        # Enabled through the replica that did not disable it, if r0 did (or through
        # r1 either way: both know it is disabled).
        async with http.post(f"{replicas[1].url}/v1/sinks/a/enable") as resp:
            assert resp.status == 200, await resp.text()
            assert (await resp.json())["was_disabled"] is True
        await _until("a enabled on both replicas", lambda: everywhere(False))
        await _until("a has what it missed", lambda: at("/a", second))
        assert {e.get_subject() for e in sinks.hits["/a"]} == {first, second}
        await _until("b heard of the enable", lambda: _has(sinks, SINK_TYPES[1]))
        b_ops = [e.get_type() for e in sinks.hits["/b"] if e.get_type() in SINK_TYPES]
        assert b_ops == list(SINK_TYPES)  # each change announced once, by one replica
    finally:
        for replica in replicas:
            if replica.proc is not None and replica.proc.poll() is None:
                replica.proc.send_signal(signal.SIGCONT)
            replica.ensure_dead()
        await http.close()
        assert sinks.runner is not None
        await sinks.runner.cleanup()
        await sim.close()


async def _has(sinks: Sinks, wanted: str) -> bool:
    return wanted in [e.get_type() for e in sinks.hits["/b"]]
