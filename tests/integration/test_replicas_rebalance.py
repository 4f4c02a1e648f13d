"""A replica that joins late gets a share of the work its peers already hold.

Two ``orchestrator serve`` replicas on one PostgreSQL database take a few
hundred long-running jobs; a third starts, and within a generous bound it
holds a fair part of them (its ``/readyz`` leases), handed back by the others
at their renewals. Every tracking still ends exactly once with its scripted
outcome, the feed reads the same from every replica, and no job is read by two
replicas at once (the checks of test_replicas.py).
"""

from __future__ import annotations

import asyncio
import math
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from orchestrator.engine.replica import REBALANCE_SLACK_FRACTION, REBALANCE_SLACK_MIN
from orchestrator.simulator import start_simulator
from tests.integration.test_replicas import (
    EXPECTED,
    NAMES,
    Cluster,
    _check_end,
    _diagnose,
    write_config,
)
from tests.serveproc import ServeProcess, free_port

pytestmark = pytest.mark.slow

JOBS = 600


async def _intake(c: Cluster, n: int) -> dict[str, str]:
    """``n`` jobs that run for half a minute or so, accepted by the first two replicas."""
    plan: dict[str, str] = {}
    items: list[dict[str, Any]] = []
    ends = list(EXPECTED)
    for i in range(n):
        end = ends[i % 3]
        steps = [
            {"after_s": 0, "status": "Queued"},
            {"after_s": 1 + (i % 5), "status": "Leased"},
            {"after_s": 30 + (i % 13), "status": end},
        ]
        async with c.session.post(
            f"{c.sim.url}/_sim/script", json={"kind": "function_job", "steps": steps}
        ) as resp:
            assert resp.status == 201
            rid = str((await resp.json())["id"])
        plan[rid] = EXPECTED[end]
        items.append({"kind": "function_job", "remote_id": rid, "timeout_s": 300})
    half = n // 2
    for replica, batch in ((c.replicas[0], items[:half]), (c.replicas[1], items[half:])):
        async with c.session.post(
            f"{replica.url}/v1/trackings/batch", json={"items": batch}
        ) as resp:
            assert resp.status == 200, await resp.text()
            assert all(i["status"] == 201 for i in (await resp.json())["items"])
    return plan


async def _ready(c: Cluster, replica: ServeProcess) -> Any:
    return await c.get(replica, "/readyz")


async def _wait_spread(c: Cluster, replicas: list[ServeProcess]) -> None:
    """Wait (generously) until each replica holds its share of all JOBS, within the
    slack; nothing has ended yet (the jobs run for 30 s or more)."""
    share = math.ceil(JOBS / len(replicas))
    slack = max(REBALANCE_SLACK_MIN, math.ceil(share * REBALANCE_SLACK_FRACTION))
    held: list[int] = []
    try:
        async with asyncio.timeout(20):  # renewals a second apart, then a claim
            while True:
                held = [(await _ready(c, r))["leases"] for r in replicas]
                if min(held) >= share - slack and max(held) <= share + slack:
                    return
                await asyncio.sleep(0.25)
    except TimeoutError:
        raise AssertionError(f"not spread: {held} {await _diagnose(c)}") from None


async def test_a_replica_that_joins_late_is_handed_a_share(
    tmp_path: Path, postgres_dsn: str
) -> None:
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=21)
    replicas = []
    for i in range(3):
        port = free_port()
        cfg = write_config(tmp_path / f"r{i}.toml", sim.url, port, NAMES[i])
        env = {"ORCH_STORE__URL": postgres_dsn}
        replicas.append(ServeProcess(cfg, port, tmp_path / f"r{i}.log", env))
    session = aiohttp.ClientSession()
    c = Cluster(sim, replicas, session, postgres_dsn)
    try:
        for replica in replicas[:2]:
            await replica.start(session)
        plan = await _intake(c, JOBS)
        # What one accepted while the other held little is spread between the two.
        await _wait_spread(c, replicas[:2])
        await replicas[2].start(session)
        await _wait_spread(c, replicas)
        metrics = await (await session.get(replicas[0].url + "/metrics")).text()
        assert any(
            line.startswith("orchestrator_lease_handovers_total ") and float(line.split()[-1]) > 0
            for line in metrics.splitlines()
        )
        await _check_end(c, plan, replicas)
    finally:
        for replica in replicas:
            if replica.proc is not None and replica.proc.poll() is None:
                replica.proc.send_signal(signal.SIGCONT)
            replica.ensure_dead()
        await session.close()
        await sim.close()
