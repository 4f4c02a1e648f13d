"""Work found by filter survives a SIGKILL: what was found is kept, the rest is found
after the restart, and each tracking ends exactly once."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

from orchestrator.simulator import start_simulator
from tests.core.test_restart import write_config
from tests.serveproc import ServeProcess, free_port

OPS = "/api/workspace/admin/function-operations"
SHIPPED = "bind-order-shipped"
APPROVE = "act-order-approve"


async def _json(session: aiohttp.ClientSession, method: str, url: str, body: Any = None) -> Any:
    async with session.request(method, url, json=body) as resp:
        assert resp.status < 300, await resp.text()
        return await resp.json()


async def _finished(session: aiohttp.ClientSession, sim: str, query: str, count: int) -> list[str]:
    """The ids of the ``count`` jobs the operations route lists, once all have ended."""
    async with asyncio.timeout(10):
        while True:
            page = await _json(session, "GET", f"{sim}{OPS}/jobs?{query}")
            items = page["Items"]
            if len(items) == count and all((j.get("Run") or {}).get("CompletedAt") for j in items):
                return [j["JobId"] for j in items]
            await asyncio.sleep(0.05)


async def _tracking(session: aiohttp.ClientSession, base: str, tid: str) -> dict[str, Any]:
    return await _json(session, "GET", f"{base}/v1/trackings/{tid}")  # type: ignore[no-any-return]


async def test_sigkill_between_found_jobs_loses_nothing(tmp_path: Path) -> None:
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=11)
    port = free_port()
    serve = ServeProcess(write_config(tmp_path, sim.url, port), port, tmp_path / "serve.log")
    base = serve.url
    try:
        async with aiohttp.ClientSession() as session:
            job = {"pickup_s": 0.05, "duration_s": 0.1, "sequence": ["success"]}
            await _json(session, "PUT", f"{sim.url}/_sim/profile", {"job": job})
            await serve.start(session)
            track = f"{base}/v1/trackings"
            trigger = await _json(session, "POST", track, {
                "kind": "trigger_work", "trigger_binding_id": SHIPPED, "entity_id": "rs-1",
                "expect_jobs": 2, "timeout_s": 60,
            })  # fmt: skip
            action = await _json(session, "POST", track, {
                "kind": "action_work", "action_id": APPROVE, "entity_id": "rs-2", "timeout_s": 60,
            })  # fmt: skip
            records = f"{sim.url}/api/workspace/entities/Order/records"
            await _json(session, "PUT", f"{records}/rs-1", {"Status": "Shipped"})
            triggered = f"TriggerBindingId={SHIPPED}&EntityId=rs-1"
            [first] = await _finished(session, sim.url, triggered, 1)
            tid, aid = trigger["tracking_id"], action["tracking_id"]
            async with asyncio.timeout(10):  # the first job is found, the action read once
                while (await _tracking(session, base, tid))["remote_id"] != first:
                    await asyncio.sleep(0.05)
                while (await _tracking(session, base, aid))["polls"] < 1:
                    await asyncio.sleep(0.05)
            serve.kill()

            # While nobody watches: the second triggered job and the action's job run and end.
            await _json(session, "PUT", f"{records}/rs-1", {"Status": "Shipped"})
            answer = await _json(session, "POST", f"{records}/rs-2/actions/{APPROVE}/enqueue", {})
            action_job = answer["Data"]["JobId"]
            both = await _finished(session, sim.url, triggered, 2)
            await _finished(session, sim.url, f"ActionId={APPROVE}&EntityId=rs-2", 1)

            await serve.start(session)
            finals = {}
            async with asyncio.timeout(20):
                for one in (tid, aid):
                    while (t := await _tracking(session, base, one))["state"] != "terminal":
                        await asyncio.sleep(0.05)
                    finals[one] = t
            found = finals[tid]
            assert found["outcome"] == "succeeded", found
            assert found["result"]["seen"] == {"matched": 2, "expected": 2}
            assert sorted(j["job_id"] for j in found["result"]["jobs"]) == sorted(both)
            assert found["remote_id"] == first  # the first job found, kept across the kill
            acted = finals[aid]
            assert acted["outcome"] == "succeeded", acted
            assert acted["remote_id"] == action_job

            feed = await _json(session, "GET", f"{base}/v1/events?after=0&limit=1000")
            ends = Counter(
                e["subject"] for e in feed["events"] if not e["type"].endswith("status_changed")
            )
            assert ends == {tid: 1, aid: 1}
            assert serve.terminate() == 0
    finally:
        serve.ensure_dead()
        await sim.close()
