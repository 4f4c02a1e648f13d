"""A real ``orchestrator serve`` process, killed with SIGKILL mid-run and restarted."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

from orchestrator.simulator import start_simulator
from tests.serveproc import ServeProcess, free_port


def write_config(tmp_path: Path, sim_url: str, port: int) -> Path:
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
not_found_min_s = 0.2

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


EXPECTED = {
    "Completed": "succeeded",
    "Failed": "failed",
    "Cancelled": "cancelled",
    "Succeeded": "succeeded",
}


async def _script(session: aiohttp.ClientSession, sim: str, kind: str, end: str, at: float) -> str:
    first = "Running" if kind != "function_job" else "Leased"
    steps: list[dict[str, Any]] = [
        {"after_s": 0, "status": "Queued"},
        {"after_s": at / 2, "status": first},
        {"after_s": at, "status": end},
    ]
    async with session.post(f"{sim}/_sim/script", json={"kind": kind, "steps": steps}) as resp:
        assert resp.status == 201
        return str((await resp.json())["id"])


async def test_sigkill_mid_run_loses_nothing(tmp_path: Path) -> None:
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=3)
    port = free_port()
    cfg = write_config(tmp_path, sim.url, port)
    serve = ServeProcess(cfg, port, tmp_path / "serve.log")
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            await serve.start(session)
            plan: dict[str, str] = {}
            items = []
            for i in range(90):
                kind = ("function_job", "net_operation_build", "workspace_ui_build")[i % 3]
                ends = (
                    ["Completed", "Failed", "Cancelled"]
                    if kind == "function_job"
                    else ["Succeeded", "Failed", "Cancelled"]
                )
                end = ends[(i // 3) % 3]
                rid = await _script(session, sim.url, kind, end, 0.4 + (i % 10) * 0.25)
                plan[f"{kind}/{rid}"] = EXPECTED[end]
                items.append({"kind": kind, "remote_id": rid, "timeout_s": 60})
            async with session.post(f"{base}/v1/trackings/batch", json={"items": items}) as resp:
                assert resp.status == 200
                acknowledged = [i["tracking"]["tracking_id"] for i in (await resp.json())["items"]]
            assert len(acknowledged) == 90

            for pause in (0.5, 0.7):
                await asyncio.sleep(pause)
                serve.kill()
                await serve.start(session)
                # Every resumed tracking gets read: the restart gauge drains to 0.
                async with asyncio.timeout(20):
                    while True:
                        async with session.get(f"{base}/metrics") as resp:
                            text = await resp.text()
                        line = 'orchestrator_resume_pending{workspace="default"} '
                        if float(text.split(line, 1)[1].split("\n", 1)[0]) == 0:
                            break
                        await asyncio.sleep(0.05)

            async with asyncio.timeout(60):
                while True:
                    async with session.get(f"{base}/v1/trackings?state=active&limit=1") as resp:
                        if not (await resp.json())["items"]:
                            break
                    await asyncio.sleep(0.1)
            outcomes = {}
            cursor = None
            while True:
                url = f"{base}/v1/trackings?limit=50" + (f"&cursor={cursor}" if cursor else "")
                async with session.get(url) as resp:
                    page = await resp.json()
                for t in page["items"]:
                    outcomes[f"{t['kind']}/{t['remote_id']}"] = t["outcome"]
                cursor = page["next_cursor"]
                if not cursor:
                    break
            assert outcomes == plan

            events: list[dict[str, Any]] = []
            after = 0
            while True:
                async with session.get(f"{base}/v1/events?after={after}&limit=1000") as resp:
                    feed = await resp.json()
                if not feed["events"]:
                    break
                events += feed["events"]
                after = feed["next_after"]
            terminal = [e for e in events if not e["type"].endswith("status_changed")]
            per_tracking = Counter(e["subject"] for e in terminal)
            assert set(per_tracking) == set(acknowledged)
            assert all(n == 1 for n in per_tracking.values())
            assert serve.terminate() == 0
    finally:
        if serve.proc and serve.proc.poll() is None:
            serve.proc.kill()
        await sim.close()


async def test_resumed_trackings_are_read_again_only_after_the_resume_window(
    tmp_path: Path,
) -> None:
    """300 resumed trackings under a 100/s limit: first reads spread over a 3 s
    window, and no tracking is read a second time sooner than that window after
    its first read, jitter included, so that re-reads never crowd out the first
    reads of the others."""
    n, rate = 300, 100
    window = n / rate
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=5)
    port = free_port()
    cfg = write_config(tmp_path, sim.url, port)
    text = cfg.read_text().replace("max_delay_s = 0.3", "max_delay_s = 30\njitter = 0.2")
    cfg.write_text(text + f"max_requests_per_second = {rate}\n")
    serve = ServeProcess(cfg, port, tmp_path / "serve.log")
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            profile = {"job": {"pickup_s": 86_400, "duration_s": 1}}
            async with session.put(f"{sim.url}/_sim/profile", json=profile) as resp:
                assert resp.status == 200
            async with session.post(f"{sim.url}/_sim/jobs/bulk", json={"count": n}) as resp:
                ids = (await resp.json())["ids"]
            await serve.start(session)
            items = [{"kind": "function_job", "remote_id": rid, "timeout_s": 600} for rid in ids]
            async with session.post(f"{base}/v1/trackings/batch", json={"items": items}) as resp:
                assert resp.status == 200
            async with asyncio.timeout(30):
                while sim.state.log.stats()["routes"].get("job_status", {}).get("200", 0) < n:
                    await asyncio.sleep(0.1)
            assert serve.terminate() == 0
            # terminate() blocked this loop, which serves the simulator too: let it
            # log the old process's last reads before drawing the line.
            await asyncio.sleep(0.3)
            restarted_at = sim.state.clock()
            await serve.start(session)

            def reads_since_restart() -> list[list[float]]:
                return [
                    [
                        r["t"]
                        for r in sim.state.log.requests(rid)
                        if r["route"] == "job_status" and r["t"] >= restarted_at
                    ]
                    for rid in ids
                ]

            # Until every tracking was read and a third of them twice (enough to judge).
            async with asyncio.timeout(60):
                while True:
                    reads = reads_since_restart()
                    twice = sum(1 for r in reads if len(r) > 1)
                    if all(reads) and twice >= n // 3:
                        break
                    await asyncio.sleep(0.25)
            gaps = [r[1] - r[0] for r in reads if len(r) > 1]
            assert min(gaps) >= 0.95 * window, sorted(gaps)[:5]
            assert serve.terminate() == 0
    finally:
        serve.ensure_dead()
        await sim.close()
