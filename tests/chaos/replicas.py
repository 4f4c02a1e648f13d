"""A chaos run of several replicas on one PostgreSQL database.

N ``orchestrator serve`` replicas share one database while trackings keep
arriving (each wave of scripted jobs is handed to a live replica in turn) and,
in a loop, one of: SIGKILL of a replica (restarted a moment later, under the
same replica id), SIGSTOP of one (a stalled loop: its leases run out while it
is stopped, then SIGCONT), or a restart of PostgreSQL itself. At the end every
tracking is checked against the simulator's scripted truth (``check``: lost,
false terminals, two terminal events for one tracking in the feed or at the
sink), the feed is read from every replica and must be one order, and the
simulator's request log (which names the replica of every read) says whether
any job was read by two replicas without a handover gap between them.

``run_replica_chaos`` is what ``tests/chaos/test_replicas_chaos.py`` (a small
CI run) and ``scripts/chaos.py --replicas N`` (at least a hundred disruptions,
by hand) call.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from orchestrator.engine.replica import VALID_FRACTION
from orchestrator.simulator import start_simulator
from tests.chaos.harness import (
    PLATFORM_FAULTS,
    Client,
    Plan,
    Secrets,
    Sink,
    fault_hits,
    metric_sum,
    scripted_plan,
    set_faults,
    write_config,
)
from tests.chaos.report import ChaosReport, check, leaked
from tests.pgserver import CLUSTER
from tests.serveproc import ServeProcess, free_port

LEASE_TIMEOUT_S = 3.0
STALL_LAG_S = 0.9  # under lease_timeout_s / 3, as the configuration requires
HANDOVER_GAP_S = LEASE_TIMEOUT_S * (1 - VALID_FRACTION) / 2  # as tests/integration/test_replicas


@dataclass
class ReplicaChaosOptions:
    replicas: int = 3
    trackings: int = 150
    disruptions: int = 8  # kills, stops and database restarts together
    db_restart_share: float = 0.2
    stop_share: float = 0.25
    wave: int = 10  # trackings scripted and handed over together
    gap_s: tuple[float, float] = (0.4, 1.6)  # between two disruptions
    seed: int = 1
    faults: bool = True
    sink_fail_ratio: float = 0.05
    settle_timeout_s: float = 180.0


@dataclass
class Fleet:
    """The replicas and the database, and what was done to them."""

    replicas: list[ServeProcess]
    session: aiohttp.ClientSession
    token: str
    pg_dir: Path
    done: Counter[str]
    restarting: set[int]
    # Lease takeovers counted by replica lives that were then killed (a restarted
    # replica's counters start at 0): each scraped just before its SIGKILL.
    killed_lives_takeovers: float = 0.0

    def client(self, i: int) -> Client:
        return Client(self.session, self.replicas[i].url, self.token)

    def live(self) -> list[int]:
        return [
            i
            for i, r in enumerate(self.replicas)
            if i not in self.restarting and r.proc is not None and r.proc.poll() is None
        ]

    async def restart(self, i: int, after_s: float) -> None:
        """Start replica ``i`` again (same id) after ``after_s``; retried while the
        database is away and readiness cannot come."""
        try:
            await asyncio.sleep(after_s)
            for _ in range(20):
                try:
                    await self.replicas[i].start(self.session, timeout=60)
                    return
                except (AssertionError, TimeoutError):
                    self.replicas[i].ensure_dead()
                    await asyncio.sleep(1)
            raise AssertionError(f"replica {i} never came back: {self.replicas[i].tail()}")
        finally:
            self.restarting.discard(i)

    async def cont(self, i: int, after_s: float) -> None:
        try:
            await asyncio.sleep(after_s)
            proc = self.replicas[i].proc
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
        finally:
            self.restarting.discard(i)

    async def restart_database(self) -> None:
        proc = await asyncio.create_subprocess_exec(
            "bash", str(CLUSTER), "restart", str(self.pg_dir)
        )
        assert await proc.wait() == 0, "pg-cluster.sh restart failed"


async def _intake(
    fleet: Fleet,
    sim_url: str,
    options: ReplicaChaosOptions,
    rng: random.Random,
    plan: Plan,
    acknowledged: set[str],
    pace_s: float,
) -> None:
    """Script a wave of jobs and hand it to the next live replica, until all are in;
    a batch whose answer was lost (killed, stopped, database away) goes again."""
    turn = itertools.count()
    for start in range(0, options.trackings, options.wave):
        wave = await scripted_plan(
            fleet.session,
            sim_url,
            min(options.wave, options.trackings - start),
            rng,
            spread_s=(1.0, 6.0),
            timeout_s=600,
        )
        plan.truth.update(wave.truth)
        plan.items += wave.items
        while True:
            live = fleet.live()
            if not live:
                await asyncio.sleep(0.2)
                continue
            client = fleet.client(live[next(turn) % len(live)])
            try:
                async with asyncio.timeout(10):  # a stopped replica never answers
                    status, body = await client.post("/v1/trackings/batch", {"items": wave.items})
            except (aiohttp.ClientError, OSError, TimeoutError):
                await asyncio.sleep(0.2)
                continue
            if status != 200:
                await asyncio.sleep(0.2)
                continue
            for item in body["items"]:
                assert item["status"] in (200, 201), item
                acknowledged.add(item["tracking"]["tracking_id"])
            break
        await asyncio.sleep(pace_s)


async def _disrupt(
    fleet: Fleet, options: ReplicaChaosOptions, rng: random.Random, say: Callable[[str], None]
) -> list[asyncio.Task[None]]:
    """Each kind in its share of the disruptions (at least one each), shuffled."""
    pending: list[asyncio.Task[None]] = []
    n = options.disruptions
    restarts = max(1, round(n * options.db_restart_share))
    stops = max(1, round(n * options.stop_share))
    kinds = ["database"] * restarts + ["stop"] * stops + ["kill"] * max(0, n - restarts - stops)
    rng.shuffle(kinds)
    for k, kind in enumerate(kinds):
        await asyncio.sleep(rng.uniform(*options.gap_s))
        live = fleet.live()
        if len(live) < 2 and kind != "database":
            # One replica is always left running, someone must hold the work: wait for
            # the others to come back.
            async with asyncio.timeout(120):
                while len(live := fleet.live()) < 2:
                    await asyncio.sleep(0.2)
        if kind == "database":
            await fleet.restart_database()
            fleet.done["database restarts"] += 1
            what = "database restarted"
        elif kind == "stop":
            i = rng.choice(live)
            proc = fleet.replicas[i].proc
            assert proc is not None
            proc.send_signal(signal.SIGSTOP)
            fleet.restarting.add(i)
            stopped_s = rng.uniform(0.5, 2.5) * LEASE_TIMEOUT_S
            pending.append(asyncio.create_task(fleet.cont(i, stopped_s)))
            fleet.done["replica SIGSTOPs"] += 1
            what = f"replica {i} stopped for {stopped_s:.1f}s"
        else:
            i = rng.choice(live)
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with asyncio.timeout(2):
                    metrics = await fleet.client(i).metrics()
                fleet.killed_lives_takeovers += metric_sum(
                    metrics, "orchestrator_lease_takeovers_total"
                )
            fleet.replicas[i].kill()
            fleet.restarting.add(i)
            back_s = rng.uniform(0, 1.5) * LEASE_TIMEOUT_S
            pending.append(asyncio.create_task(fleet.restart(i, back_s)))
            fleet.done["replica SIGKILLs"] += 1
            what = f"replica {i} killed, back in {back_s:.1f}s"
        say(f"disruption {k + 1}/{options.disruptions}: {what}")
    return pending


def overlapping_reads(log: Any, truth: dict[str, str]) -> tuple[int, int, list[str]]:
    """(handovers, reads of one job by two replicas closer than the handover gap,
    examples) from the simulator's request log."""
    handovers, close, examples = 0, 0, []
    for key in truth:
        rid = key.rsplit("/", 1)[-1]
        reads = sorted(
            (r["t"], r["replica"])
            for r in log.requests(rid)
            if r["route"] in ("job_status", "build_status") and r["replica"]
        )
        for (t0, a), (t1, b) in itertools.pairwise(reads):
            if a != b:
                handovers += 1
                if t1 - t0 < HANDOVER_GAP_S:
                    close += 1
                    examples.append(f"{rid} read by {a} then {b} {t1 - t0:.3f}s apart")
    return handovers, close, examples


async def run_replica_chaos(
    workdir: Path,
    dsn: str,
    pg_dir: Path,
    options: ReplicaChaosOptions,
    say: Callable[[str], None] = lambda _: None,
) -> tuple[ChaosReport, dict[str, Any]]:
    rng = random.Random(options.seed)
    secrets = Secrets()
    sink = Sink(secrets.sink_secret, fail_ratio=options.sink_fail_ratio, seed=options.seed)
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=options.seed)
    replicas: list[ServeProcess] = []
    report = ChaosReport()
    try:
        sink_url = await sink.start()
        for i in range(options.replicas):
            port = free_port()
            directory = workdir / f"r{i}"
            directory.mkdir(parents=True, exist_ok=True)
            cfg = write_config(
                directory,
                port=port,
                sim_url=sim.url,
                store_path=directory / "unused.db",  # store.url wins
                sink_url=sink_url,
            )
            env = {
                **secrets.env(),
                "ORCH_STORE__URL": dsn,
                "ORCH_STORE__LEASE_TIMEOUT_S": str(LEASE_TIMEOUT_S),
                "ORCH_STORE__POOL_SIZE": "4",
                "ORCH_SERVER__REPLICA_ID": f"r{i}",
                "ORCH_POLLING__STALL_LAG_S": str(STALL_LAG_S),
            }
            replicas.append(ServeProcess(cfg, port, directory / "serve.log", env))
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            fleet = Fleet(replicas, session, secrets.api_token, pg_dir, Counter(), set())
            for replica in replicas:
                await replica.start(session, timeout=60)
            if options.faults:
                await set_faults(session, sim.url, PLATFORM_FAULTS)
            say(f"{options.replicas} replicas up; {options.trackings} trackings to come")
            plan = Plan()
            acknowledged: set[str] = set()
            started = time.monotonic()
            waves = max(1, options.trackings // options.wave)
            mean_gap = sum(options.gap_s) / 2
            pace = options.disruptions * mean_gap / waves  # intake lasts as long as the chaos
            intake = asyncio.create_task(
                _intake(fleet, sim.url, options, rng, plan, acknowledged, pace)
            )
            pending = await _disrupt(fleet, options, rng, say)
            await asyncio.gather(*pending)
            await intake
            chaos_s = time.monotonic() - started
            say(f"chaos over after {chaos_s:.0f}s; settling")
            await _settle(fleet, sink, len(plan.truth), options.settle_timeout_s)
            elapsed = time.monotonic() - started
            first = fleet.client(0)
            trackings = await first.trackings()
            events = await first.events()
            feeds_differ = 0
            for i in range(1, options.replicas):
                feeds_differ += int(await fleet.client(i).events() != events)
            metrics = [await fleet.client(i).metrics() for i in range(options.replicas)]
            hits = await fault_hits(session, sim.url)
            for replica in replicas:
                assert replica.terminate() == 0, replica.tail()
        check(report, plan.truth, acknowledged, trackings, events, sink.terminal_ids(),
              sink.terminal_hits())  # fmt: skip
        handovers, close, examples = overlapping_reads(sim.state.log, plan.truth)
        report.examples += examples
        report.kills_survived = sum(fleet.done.values())
        report.faults_injected = {**dict(fleet.done), **hits}
        report.bad_signatures = sink.bad_signatures
        report.sink_refusals = sink.refused
        logs = "".join(r.tail(10**9) for r in replicas)
        report.secrets_leaked = leaked(secrets.values(), logs, str(events), *metrics)
        takeovers = fleet.killed_lives_takeovers + sum(
            metric_sum(m, "orchestrator_lease_takeovers_total") for m in metrics
        )
        report.notes += [
            f"replicas: {options.replicas}; disruptions: {dict(fleet.done)}",
            f"reads of one job by two replicas closer than {HANDOVER_GAP_S:.2f}s: {close}"
            f" (of {handovers} handovers)",
            f"feeds that differ from replica 0's: {feeds_differ}",
            f"lease takeovers counted by every life of the replicas: {takeovers:.0f}",
            f"chaos {chaos_s:.0f}s, run time {elapsed:.0f}s",
        ]
        figures = {
            "elapsed_s": elapsed,
            "chaos_s": chaos_s,
            "handovers": handovers,
            "takeovers": takeovers,
            "close_reads": close,
            "feeds_differ": feeds_differ,
            "disruptions": dict(fleet.done),
        }
        return report, figures
    finally:
        for replica in replicas:
            if replica.proc is not None and replica.proc.poll() is None:
                replica.proc.send_signal(signal.SIGCONT)
            replica.ensure_dead()
        await sink.close()
        await sim.close()


async def _settle(fleet: Fleet, sink: Sink, expected: int, timeout_s: float) -> None:
    """Until no tracking is active and every terminal event reached the sink."""
    async with asyncio.timeout(timeout_s):
        while True:
            with contextlib.suppress(aiohttp.ClientError, AssertionError, TimeoutError):
                if not await fleet.client(0).active_count():
                    break
            await asyncio.sleep(0.5)
        while len(sink.terminal_ids()) < expected:
            await asyncio.sleep(0.5)
