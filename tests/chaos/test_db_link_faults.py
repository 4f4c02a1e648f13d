"""A replica whose database link hangs or slows down while it still reaches the
workspace: it must say so (readiness, metrics) and answer intake within a bound,
and a slow database must not cost it its leases.

Each replica reaches PostgreSQL through a fault proxy of the test's own
(``tests/faultproxy.py``) on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import pytest

from orchestrator.simulator import RunningSimulator, start_simulator
from tests.chaos.harness import metric_sum, script
from tests.chaos.links import PROBE_TIMEOUT_S, Replica, busiest_second, probe, replicas

pytestmark = pytest.mark.slow

LEASE_TIMEOUT_S = 3.0


async def leases_reach(replica: Replica, n: int) -> None:
    """Until the replica's lease gauge (kept every claim interval) shows ``n``."""
    try:
        async with asyncio.timeout(30):
            while metric_sum(await replica.client.metrics(), "orchestrator_replica_leases") != n:
                await asyncio.sleep(0.2)
    except TimeoutError:
        held = metric_sum(await replica.client.metrics(), "orchestrator_replica_leases")
        raise AssertionError(f"{held:g} leases, not {n}: {replica.serve.tail(4000)}") from None


@pytest.mark.timeout(180)
async def test_a_hung_database_link_shows_in_readiness_metrics_and_intake(
    tmp_path: Path, postgres_dsn: str
) -> None:
    async with (
        await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=3) as sim,
        aiohttp.ClientSession() as session,
        replicas(tmp_path, postgres_dsn, sim, session, 1) as [r0],
    ):
        # Every job runs past the test's end: a job that ended would leave the count.
        for _ in range(4):
            rid = await script(session, sim.url, "function_job", "Completed", 300)
            status, _ = await r0.client.post(
                "/v1/trackings", {"kind": "function_job", "remote_id": rid}
            )
            assert status == 201
        await leases_reach(r0, 4)

        r0.proxy.set("hang")
        cut = time.monotonic()
        late_rid = await script(session, sim.url, "function_job", "Completed", 300)
        body = {"kind": "function_job", "remote_id": late_rid}
        started = time.monotonic()
        async with session.post(
            r0.serve.url + "/v1/trackings", json=body, headers=r0.client.headers,
            timeout=aiohttp.ClientTimeout(total=30),
        ) as resp:  # fmt: skip
            intake = (time.monotonic() - started, resp.status, resp.headers.get("Retry-After"))
        samples = []
        while time.monotonic() - cut < LEASE_TIMEOUT_S * 2:
            at = time.monotonic() - cut
            ready = await probe(session, r0.serve.url + "/readyz")
            took, status, text = await probe(session, r0.serve.url + "/metrics")
            up = metric_sum(text, "orchestrator_store_up") if status == 200 else None
            leases = metric_sum(text, "orchestrator_replica_leases") if status == 200 else None
            samples.append((round(at, 2), ready[:2], round(took, 2), up, leases))
            await asyncio.sleep(0.25)

        # Intake answered within its bound: 503 with Retry-After, not a hang.
        assert intake[1] == 503 and intake[2] is not None and intake[0] < 7, intake
        # Every probe answered within the bound; readiness said 503 throughout.
        assert all(s[1][1] == 503 and s[1][0] <= PROBE_TIMEOUT_S for s in samples), samples
        assert all(s[2] <= PROBE_TIMEOUT_S and s[3] is not None for s in samples), samples
        # store_up went to 0 once a renewal went unanswered for a third of the lease (and
        # a claim interval); the leases were given up once they must have run out.
        assert all(s[3] == 0 for s in samples if s[0] > LEASE_TIMEOUT_S / 3 + 1.5), samples
        assert all(s[4] == 0 for s in samples if s[0] > LEASE_TIMEOUT_S + 1.5), samples
        log = r0.serve.tail(10**6)
        assert "store unreachable" in log

        r0.proxy.set("pass")
        async with asyncio.timeout(30):
            while (await probe(session, r0.serve.url + "/readyz"))[1] != 200:
                await asyncio.sleep(0.2)
        # The tracking refused with 503 is taken when posted again (once, whatever the
        # refused write did meanwhile), and the replica holds all five again.
        status, tracking = await r0.client.post("/v1/trackings", body)
        assert status in (200, 201), tracking
        await leases_reach(r0, 5)
        assert await asyncio.to_thread(r0.serve.terminate) == 0


def status_reads(sim: RunningSimulator) -> int:
    routes = sim.state.log.stats()["routes"]
    return sum(sum(routes.get(r, {}).values()) for r in ("job_status", "build_status"))


@pytest.mark.timeout(240)
async def test_a_slow_database_costs_no_lease_and_at_most_half_the_reads(
    tmp_path: Path, postgres_dsn: str
) -> None:
    """300 ms added to every chunk both ways on every replica's database link, while
    60 jobs run (none changes status meanwhile): renewals keep every lease and the
    reads go on at least at half their rate. (A renewal took 5 round trips, 3.0 s
    on such a link, against its bound of 2.67 s: every lease was lost.)"""
    async with (
        await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=4) as sim,
        aiohttp.ClientSession() as session,
        replicas(tmp_path, postgres_dsn, sim, session, 3, lease_timeout_s=8) as fleet,
    ):
        for r in fleet:
            items = []
            for _ in range(20):
                rid = await script(session, sim.url, "function_job", "Completed", 50)
                items.append({"kind": "function_job", "remote_id": rid, "timeout_s": 600})
            status, _ = await r.client.post("/v1/trackings/batch", {"items": items})
            assert status == 200
        await asyncio.sleep(4)  # every job read a few times
        phase = 10.0
        before = status_reads(sim)
        await asyncio.sleep(phase)
        fast = status_reads(sim) - before
        takeovers = [await takeovers_of(r) for r in fleet]
        for r in fleet:
            r.proxy.set("delay", 0.3)
        before = status_reads(sim)
        await asyncio.sleep(phase)
        slow = status_reads(sim) - before
        after = [await takeovers_of(r) for r in fleet]
        for r in fleet:
            r.proxy.set("pass")
        print(f"status reads in {phase:g} s: {fast} before, {slow} with 300 ms added")
        logs = "".join(r.serve.tail(10**7) for r in fleet)
        assert "unanswered" not in logs
        assert after == takeovers
        assert slow >= fast / 2, (slow, fast)
        async with asyncio.timeout(90):
            while await fleet[0].client.active_count():
                await asyncio.sleep(0.5)
        trackings = await fleet[0].client.trackings()
        assert len(trackings) == 60
        assert all(t["outcome"] == "succeeded" for t in trackings), trackings
        events = await fleet[0].client.events()
        terminal = [e for e in events if e["type"].endswith(".succeeded")]
        assert len(terminal) == 60
        for r in fleet:
            assert await asyncio.to_thread(r.serve.terminate) == 0


async def takeovers_of(replica: Replica) -> float:
    return metric_sum(await replica.client.metrics(), "orchestrator_lease_takeovers_total")


async def post_jobs(
    sim: RunningSimulator, session: aiohttp.ClientSession, replica: Replica, n: int
) -> None:
    items = []
    for _ in range(n):
        rid = await script(session, sim.url, "function_job", "Completed", 60)
        items.append({"kind": "function_job", "remote_id": rid, "timeout_s": 600})
    status, _ = await replica.client.post("/v1/trackings/batch", {"items": items})
    assert status == 200


@pytest.mark.timeout(180)
async def test_a_replica_that_rejoins_keeps_the_fleet_within_the_rate_limit(
    tmp_path: Path, postgres_dsn: str
) -> None:
    """r0's database link hangs past its lease; its peers take the whole limit
    between them. When it heals, work posted to r0 waits until both peers have
    counted it: before that their halves and its third would pass the limit."""
    limit = 30
    async with (
        await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=5) as sim,
        aiohttp.ClientSession() as session,
        replicas(tmp_path, postgres_dsn, sim, session, 3, rate=limit) as fleet,
    ):
        for r in fleet:  # enough work to keep every share busy (about 3 reads a second each)
            await post_jobs(sim, session, r, 15)
        await asyncio.sleep(3)
        fleet[0].proxy.set("hang")
        await asyncio.sleep(LEASE_TIMEOUT_S * 2)  # r0 is gone from the peers' count
        fleet[0].proxy.set("pass")
        async with asyncio.timeout(30):
            while True:
                _, status, _ = await probe(session, fleet[0].serve.url + "/readyz")
                if status == 200:
                    break
                await asyncio.sleep(0.1)
        await post_jobs(sim, session, fleet[0], 15)  # r0 reads these as soon as it may
        await asyncio.sleep(LEASE_TIMEOUT_S * 2)
        busiest = busiest_second(sim)[0]
        # Each replica's bucket lets through its share plus a burst of one a second.
        print(f"busiest second: {busiest} requests against a limit of {limit}")
        assert busiest <= limit + len(fleet), busiest
        for r in fleet:
            assert await asyncio.to_thread(r.serve.terminate) == 0
