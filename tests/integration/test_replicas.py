"""Three ``orchestrator serve`` replicas on one PostgreSQL database, through the public API.

Trackings are accepted round-robin by the three replicas (a load balancer's
share), one replica is killed (SIGKILL) or stopped (SIGSTOP) mid-run, and at
the end every tracking has its scripted outcome, exactly one terminal event,
and the feed reads the same from every replica. Waits are bounded loops with
generous bounds; nothing asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg  # type: ignore[import-untyped]
import pytest

from orchestrator.engine.replica import VALID_FRACTION
from orchestrator.simulator import start_simulator
from tests.pgserver import CLUSTER, DIR_ENV
from tests.serveproc import ServeProcess, free_port

pytestmark = pytest.mark.slow

LEASE_TIMEOUT_S = 3
RATE = 150  # the workspace's limit, for all replicas together
NAMES = ("r0", "r1", "r2")
HANDOVER_GAP_S = LEASE_TIMEOUT_S * (1 - VALID_FRACTION) / 2  # see _check_reads


def write_config(path: Path, sim_url: str, port: int, name: str) -> Path:
    path.write_text(
        f"""
[server]
listen = "127.0.0.1:{port}"
allow_unauthenticated = true
shutdown_grace_s = 2
replica_id = "{name}"

[store]
lease_timeout_s = {LEASE_TIMEOUT_S}
pool_size = 4

[polling]
initial_delay_s = 0.1
max_delay_s = 0.5
stall_lag_s = 0.9
not_found_min_s = 0.2

[logging]
format = "json"
level = "INFO"

[[workspaces]]
name = "default"
base_url = "{sim_url}"
request_timeout_s = 2
max_requests_per_second = {RATE}
max_in_flight = 30
"""
    )
    return path


@dataclass
class Cluster:
    sim: Any
    replicas: list[ServeProcess]
    session: aiohttp.ClientSession
    dsn: str

    async def get(self, replica: ServeProcess, path: str) -> Any:
        async with self.session.get(replica.url + path) as resp:
            assert resp.status == 200, await resp.text()
            return await resp.json()


@pytest.fixture
async def cluster(tmp_path: Path, postgres_dsn: str) -> AsyncIterator[Cluster]:
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=11)
    replicas = []
    for i in range(3):
        port = free_port()
        cfg = write_config(tmp_path / f"r{i}.toml", sim.url, port, NAMES[i])
        env = {"ORCH_STORE__URL": postgres_dsn}
        replicas.append(ServeProcess(cfg, port, tmp_path / f"r{i}.log", env))
    session = aiohttp.ClientSession()
    try:
        for replica in replicas:
            await replica.start(session)
        yield Cluster(sim, replicas, session, postgres_dsn)
    finally:
        for replica in replicas:
            if replica.proc is not None and replica.proc.poll() is None:
                replica.proc.send_signal(signal.SIGCONT)
            replica.ensure_dead()
        await session.close()
        await sim.close()


EXPECTED = {"Completed": "succeeded", "Failed": "failed", "Cancelled": "cancelled"}


async def _intake(c: Cluster, n: int) -> dict[str, str]:
    """``n`` scripted jobs, accepted in batches by the replicas in turn; remote id to
    the outcome its script ends with."""
    plan: dict[str, str] = {}
    items: list[dict[str, Any]] = []
    ends = list(EXPECTED)
    for i in range(n):
        end = ends[i % 3]
        steps = [
            {"after_s": 0, "status": "Queued"},
            {"after_s": 0.5 + (i % 7) * 0.4, "status": "Leased"},
            {"after_s": 3.5 + (i % 11) * 0.5, "status": end},
        ]
        async with c.session.post(
            f"{c.sim.url}/_sim/script", json={"kind": "function_job", "steps": steps}
        ) as resp:
            assert resp.status == 201
            rid = str((await resp.json())["id"])
        plan[rid] = EXPECTED[end]
        items.append({"kind": "function_job", "remote_id": rid, "timeout_s": 300})
    for start in range(0, n, 250):
        replica = c.replicas[(start // 250) % 3]
        batch = {"items": items[start : start + 250]}
        async with c.session.post(f"{replica.url}/v1/trackings/batch", json=batch) as resp:
            assert resp.status == 200, await resp.text()
            assert all(i["status"] == 201 for i in (await resp.json())["items"])
    return plan


async def _wait_all_terminal(c: Cluster, replica: ServeProcess, bound_s: float) -> None:
    try:
        async with asyncio.timeout(bound_s):
            while (await c.get(replica, "/v1/trackings?state=active&limit=1"))["items"]:
                await asyncio.sleep(0.25)
    except TimeoutError:
        raise AssertionError(f"still active: {await _diagnose(c)}") from None


async def _diagnose(c: Cluster) -> Any:
    """The leases of what is still active, and what each live replica says it holds."""
    conn = await asyncpg.connect(c.dsn)
    try:
        rows = await conn.fetch(
            "SELECT tracking_id, remote_id, lease_owner, lease_token,"
            " lease_until - extract(epoch FROM clock_timestamp()) AS left_s, polls, remote_status"
            " FROM trackings WHERE state = 'active' LIMIT 5"
        )
        replicas = await conn.fetch("SELECT * FROM replicas")
    finally:
        await conn.close()
    ready = []
    for replica in c.replicas:
        if replica.proc is not None and replica.proc.poll() is None:
            async with c.session.get(replica.url + "/readyz") as resp:
                ready.append(await resp.json())
    reads = {r["remote_id"]: c.sim.state.log.requests(r["remote_id"])[-4:] for r in rows}
    return {
        "reads": reads,
        "active": [dict(r) for r in rows],
        "replicas": [dict(r) for r in replicas],
        "readyz": ready,
    }


async def _outcomes(c: Cluster, replica: ServeProcess) -> dict[str, str]:
    out: dict[str, str] = {}
    cursor = None
    while True:
        page = await c.get(
            replica, "/v1/trackings?limit=1000" + (f"&cursor={cursor}" if cursor else "")
        )
        out.update({t["remote_id"]: t["outcome"] for t in page["items"]})
        cursor = page["next_cursor"]
        if not cursor:
            return out


async def _feed(c: Cluster, replica: ServeProcess) -> list[tuple[int, str, str]]:
    events: list[tuple[int, str, str]] = []
    after = 0
    while True:
        page = await c.get(replica, f"/v1/events?after={after}&limit=1000")
        if not page["events"]:
            return events
        events += [(e["seq"], e["id"], e["subject"]) for e in page["events"]]
        after = page["next_after"]


async def _check_end(c: Cluster, plan: dict[str, str], alive: list[ServeProcess]) -> int:
    await _wait_all_terminal(c, alive[0], 120)
    assert await _outcomes(c, alive[0]) == plan
    feeds = [await _feed(c, replica) for replica in alive]
    assert all(feed == feeds[0] for feed in feeds[1:])  # one order, read from any replica
    per_tracking = Counter(subject for _, _, subject in feeds[0])
    assert len(per_tracking) == len(plan) and set(per_tracking.values()) == {1}
    return _check_reads(c, plan)


def _check_reads(c: Cluster, plan: dict[str, str]) -> int:
    """From the simulator's request log, which names the replica of every request:
    no tracking read by two replicas at once, and the replicas together within the
    workspace's limit. Returns how many times a job's reader changed.

    A replica stops reading VALID_FRACTION into a lease's life unless a renewal
    landed, and another can claim it only once the whole lease ran out: a job
    that changes hands is unread for lease_timeout_s x (1 - VALID_FRACTION) = 1 s
    in between (HANDOVER_GAP_S is half that). Two replicas holding one job at
    once, each reading it every max_delay_s (0.5 s plus jitter) or sooner, would
    alternate, and of each two alternations one would be 0.3 s apart or closer.
    """
    handovers = 0
    for rid in plan:
        reads = sorted(
            (r["t"], r["replica"])
            for r in c.sim.state.log.requests(rid)
            if r["route"] == "job_status"
        )
        assert reads and all(who in NAMES for _, who in reads), (rid, reads[:3])
        for (t0, a), (t1, b) in itertools.pairwise(reads):
            if a != b:
                handovers += 1
                assert t1 - t0 >= HANDOVER_GAP_S, (rid, a, b, t1 - t0)
    stamps = sorted(r["t"] for r in c.sim.state.log.requests(None) if r["route"] != "control")
    # The simulator stamps a request when its own loop reads it: a stall of that loop
    # (two shared cores, PostgreSQL restarting beside it) bunches a tenth of a second's
    # requests into one instant. Two-second windows halve that artifact; a replica
    # over its share by a tenth still shows.
    busiest, start = 0, 0
    for end, t in enumerate(stamps):  # the most requests in any two-second window
        while stamps[start] <= t - 2.0:
            start += 1
        busiest = max(busiest, end - start + 1)
    assert busiest <= 2 * RATE * 1.1, busiest  # a little room for the share changing hands
    return handovers


async def _held(c: Cluster, replica: ServeProcess) -> int:
    async with c.session.get(replica.url + "/readyz") as resp:
        return int((await resp.json())["leases"])


async def test_three_replicas_share_the_work_and_survive_a_kill(cluster: Cluster) -> None:
    c = cluster
    plan = await _intake(c, 1500)
    # Peers are learned from heartbeats (a third of the lease apart): r2 may start
    # after r0's last one.
    async with asyncio.timeout(30):
        while (ready := await c.get(c.replicas[0], "/readyz"))["peers"] != ["r0", "r1", "r2"]:
            await asyncio.sleep(0.2)
    assert ready["replica"] == "r0"
    # Each holds what it accepted, or, where a renewal came mid-intake and it handed
    # some back (engine/replica.py), its share within the slack.
    async with asyncio.timeout(30):
        while not all(450 <= n <= 550 for n in [await _held(c, r) for r in c.replicas]):
            await asyncio.sleep(0.2)
    # The victim reads its share before the kill (a replica that just joined holds
    # its reads until its peers have counted it: engine/replica.py).
    async with asyncio.timeout(30):
        while sum(1 for r in c.sim.state.log.requests(None) if r.get("replica") == "r1") < 20:
            await asyncio.sleep(0.05)

    c.replicas[1].kill()
    survivors = [c.replicas[0], c.replicas[2]]
    async with asyncio.timeout(60):  # the victim's leases run out and are taken over
        while True:
            metrics = await (await c.session.get(survivors[0].url + "/metrics")).text()
            metrics += await (await c.session.get(survivors[1].url + "/metrics")).text()
            takeovers = sum(
                float(line.split()[-1])
                for line in metrics.splitlines()
                if line.startswith("orchestrator_lease_takeovers_total ")
            )
            if takeovers > 0:
                break
            await asyncio.sleep(0.25)
    assert await _check_end(c, plan, survivors) > 0  # the victim's jobs changed hands


async def test_a_stopped_replica_loses_its_work_and_writes_nothing_stale(
    cluster: Cluster,
) -> None:
    c = cluster
    plan = await _intake(c, 900)
    victim = c.replicas[2]
    assert victim.proc is not None
    async with asyncio.timeout(60):  # stopped while it reads its share (spread at first)
        while sum(1 for r in c.sim.state.log.requests(None) if r.get("replica") == "r2") < 20:
            await asyncio.sleep(0.05)
    victim.proc.send_signal(signal.SIGSTOP)
    await asyncio.sleep(LEASE_TIMEOUT_S * 2)  # its leases run out and move to the others
    victim.proc.send_signal(signal.SIGCONT)
    assert await _check_end(c, plan, c.replicas) > 0


async def test_a_postgresql_restart_loses_nothing(cluster: Cluster, postgres_server: str) -> None:
    c = cluster
    plan = await _intake(c, 600)
    directory = os.environ.get(DIR_ENV)
    if directory is None:
        reason = f"{DIR_ENV} is not set: cannot restart the server"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    proc = await asyncio.create_subprocess_exec("bash", str(CLUSTER), "restart", str(directory))
    assert await proc.wait() == 0
    # Every replica says so and recovers: not ready while the store was away, ready again.
    async with asyncio.timeout(60):
        for replica in c.replicas:
            while True:
                async with c.session.get(replica.url + "/readyz") as resp:
                    if resp.status == 200 and (await resp.json())["lease_state"] == "holding":
                        break
                await asyncio.sleep(0.2)
    await _check_end(c, plan, c.replicas)


def _gauge(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


async def _wait_gauge(
    session: aiohttp.ClientSession, replica: ServeProcess, name: str, value: float
) -> None:
    try:
        async with asyncio.timeout(60):
            while True:
                async with session.get(replica.url + "/metrics") as resp:
                    if _gauge(await resp.text(), name) == value:
                        return
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"{name} never {value}: {replica.tail()}") from None


async def test_the_listener_gauge_follows_the_database(
    tmp_path: Path, postgres_dsn: str, postgres_server: str
) -> None:
    """``orchestrator_store_listener_up`` is 1, 0 while PostgreSQL is down, 1 again
    once it is back (the listener reconnects by itself); ``store_up`` likewise."""
    directory = os.environ.get(DIR_ENV)
    if directory is None:
        reason = f"{DIR_ENV} is not set: cannot stop the server"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=12)
    port = free_port()
    cfg = write_config(tmp_path / "solo.toml", sim.url, port, "solo")
    replica = ServeProcess(cfg, port, tmp_path / "solo.log", {"ORCH_STORE__URL": postgres_dsn})
    session = aiohttp.ClientSession()
    stopped = False
    try:
        await replica.start(session)
        await _wait_gauge(session, replica, "orchestrator_store_listener_up", 1)
        proc = await asyncio.create_subprocess_exec("bash", str(CLUSTER), "stop", directory)
        assert await proc.wait() == 0
        stopped = True
        await _wait_gauge(session, replica, "orchestrator_store_listener_up", 0)
        await _wait_gauge(session, replica, "orchestrator_store_up", 0)
        proc = await asyncio.create_subprocess_exec("bash", str(CLUSTER), "up", directory)
        assert await proc.wait() == 0
        stopped = False
        await _wait_gauge(session, replica, "orchestrator_store_listener_up", 1)
        await _wait_gauge(session, replica, "orchestrator_store_up", 1)
    finally:
        if stopped:  # the other tests need their server back
            proc = await asyncio.create_subprocess_exec("bash", str(CLUSTER), "up", directory)
            await proc.wait()
        replica.ensure_dead()
        await session.close()
        await sim.close()
