"""A sealed group's last member read, then SIGKILL: the restarted service emits the
group's one event (its decision commits with the member's terminal write, or not at
all and then after the read again)."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

from orchestrator.simulator import start_simulator
from tests.core.test_restart import EXPECTED, _script, write_config
from tests.serveproc import ServeProcess, free_port

N = 30
BOUND_S = 60.0


async def _orchestrator_reads(sim: Any, rid: str) -> int:
    return sum(1 for r in sim.state.log.requests(rid) if r["replica"])


async def test_sigkill_after_the_last_members_read_still_emits_one_group_event(
    tmp_path: Path,
) -> None:
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=5)
    port = free_port()
    serve = ServeProcess(write_config(tmp_path, sim.url, port), port, tmp_path / "serve.log")
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            await serve.start(session)
            ends = ["Completed", "Failed", "Cancelled"]
            plan = {}
            for i in range(N):
                at = 0.4 + (i % 10) * 0.1 if i < N - 1 else 2.0  # the last ends well after
                end = ends[i % 3]
                plan[await _script(session, sim.url, "function_job", end, at)] = EXPECTED[end]
            last = list(plan)[-1]
            items = [{"kind": "function_job", "remote_id": rid, "timeout_s": 60} for rid in plan]
            body = {"items": items, "group": "killed", "seal": True}
            async with session.post(f"{base}/v1/trackings/batch", json=body) as resp:
                assert resp.status == 200, await resp.text()
            # Once the last job has ended on the workspace, the next read of it by the
            # service is the read that ends the group: kill right after it.
            job = f"{sim.url}/api/workspace/functions/jobs/{last}"
            async with asyncio.timeout(BOUND_S):
                while True:
                    # Counted before the status is looked at: a read by the service
                    # between the two (under load, the one that sees the end) is not
                    # waited for in vain.
                    seen = await _orchestrator_reads(sim, last)
                    async with session.get(job) as resp:
                        body = await resp.json()
                        status = body.get("Data", body)["Status"]
                    if status not in ("Queued", "Leased", 0, 1):
                        break
                    await asyncio.sleep(0.02)
                while await _orchestrator_reads(sim, last) == seen:
                    await asyncio.sleep(0.001)
            # Seen in runs: the restart resumes that member (its end was not committed).
            serve.kill()
            await serve.start(session)
            async with asyncio.timeout(BOUND_S):
                while True:
                    async with session.get(f"{base}/v1/groups/killed?wait=20") as resp:
                        group = await resp.json()
                    if group["ended"]:
                        break
            assert group["state"] == "completed"
            async with session.get(f"{base}/v1/trackings?group=killed&limit=100") as resp:
                members = (await resp.json())["items"]
            assert {m["remote_id"]: m["outcome"] for m in members} == plan
            async with session.get(f"{base}/v1/events?after=0&limit=1000") as resp:
                events = (await resp.json())["events"]
            grouped = [e for e in events if e["type"].startswith("com.moltaro.orchestrator.group.")]
            assert [e["type"] for e in grouped] == ["com.moltaro.orchestrator.group.completed"]
            counted = Counter(plan.values())
            assert {k: v for k, v in grouped[0]["data"]["outcomes"].items() if v} == dict(counted)
            terminal = Counter(e["subject"] for e in events if ".tracking." in e["type"]
                               and not e["type"].endswith("status_changed"))  # fmt: skip
            assert len(terminal) == N and set(terminal.values()) == {1}
            assert serve.terminate() == 0
    finally:
        serve.ensure_dead()
        await sim.close()
