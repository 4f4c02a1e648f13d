"""The ``replicas`` profile: what sharing one PostgreSQL database costs.

On a throwaway cluster (scripts/pg-cluster.sh, Debian's packages) beside the
bench simulator, in this order:

- SQLite: one service at saturation, its CPU per poll (the reference);
- PostgreSQL, 1, 2 and 3 replicas at saturation, each set on a schema of its
  own, the trackings handed to the replicas in turn (a load balancer's share):
  polls/s (ratios to one replica's), CPU per poll of the replicas and of the
  database (every postgres process of the cluster, from /proc), the
  database's share of the CPU;
- 3 replicas at half of their saturated rate: lateness (same target as full),
  then SIGKILL of one and the time until the survivors hold all its trackings
  (and have read them);
- 3 replicas delivering events of a duration mix: event latency (same target).

Two cores cannot show scaling: every replica and the database share them, so
the figures are the cost of sharing, from which docs/performance.md derives
polls/s per database core.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.events_phase import POLICY, _intake, _received, _requests, quantile
from bench.mix import Sink as MixSink
from bench.mix import create_mix
from bench.phases import Params, intake, measure_polls, new_serve, polling
from bench.procs import (
    REPO,
    Serve,
    Simulator,
    cpu_seconds,
    free_port,
    histogram_quantile,
    scrape,
    serve_config,
)

CLUSTER = REPO / "scripts" / "pg-cluster.sh"
LEASE_TIMEOUT_S = 6.0
STALL_LAG_S = 1.9  # under lease_timeout_s / 3: a saturated loop lags, it is not stalled
SATURATED = polling(0.02, 0.02, 1.0, 0.0)


class Cluster:
    """The cluster's processes: the postmaster and its children (backends, writers)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dsn = ""

    def start(self) -> str:
        shutil.rmtree(self.dir, ignore_errors=True)  # a kept --workdir's earlier cluster
        # The cluster's owner (postgres, under root) must reach it: a temporary
        # work directory is created 0700.
        self.dir.parent.chmod(0o755)
        done = subprocess.run(
            ["bash", str(CLUSTER), "start", str(self.dir)],
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"cannot start PostgreSQL: {done.stderr.strip()}")
        self.dsn = done.stdout.strip().splitlines()[-1]
        return self.dsn

    def stop(self) -> None:
        subprocess.run(["bash", str(CLUSTER), "stop", str(self.dir)], check=False, timeout=120)

    def pids(self) -> list[int]:
        postmaster = int((self.dir / "data" / "postmaster.pid").read_text().split()[0])
        out = [postmaster]
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                raw = stat.read_text()
            except OSError:
                continue
            if int(raw[raw.rindex(")") + 2 :].split()[1]) == postmaster:
                out.append(int(stat.parent.name))
        return out

    def cpu(self) -> dict[int, float]:
        out = {}
        for pid in self.pids():
            with contextlib.suppress(OSError):  # a backend that just ended
                out[pid] = cpu_seconds(pid)
        return out

    @staticmethod
    def used(before: dict[int, float], after: dict[int, float]) -> float:
        """CPU seconds between two readings (a process new since counts in full)."""
        return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())

    async def schema(self, name: str) -> str:
        import asyncpg  # type: ignore[import-untyped]

        conn = await asyncpg.connect(self.dsn)
        try:
            await conn.execute(f"CREATE SCHEMA {name}")
        finally:
            await conn.close()
        return f"{self.dsn}?search_path={name}"


def _replicas(
    workdir: Path, name: str, n: int, sim: Simulator, dsn: str, pol: dict[str, float],
    p: Params, sink: str | None = None,
) -> list[Serve]:  # fmt: skip
    out = []
    for i in range(n):
        port = free_port()
        replica = {"url": dsn, "replica_id": f"{name}-{i}", "lease_timeout_s": LEASE_TIMEOUT_S,
                   "stall_lag_s": STALL_LAG_S}  # fmt: skip
        cfg = serve_config(
            workdir / f"{name}-{i}.toml", port=port, db=workdir / "unused.db", sim_url=sim.url,
            polling=pol, max_in_flight=p.concurrency, rate=1e6, sink_url=sink, replica=replica,
        )  # fmt: skip
        out.append(Serve(cfg, port, workdir / f"{name}-{i}.log"))
    return out


async def _hand_over(
    session: aiohttp.ClientSession, replicas: list[Serve], ids: list[str], p: Params
) -> None:
    """Each replica its even share, in batches: each holds its share from intake on
    (an uneven split would be evened out by hand-overs, read late by their gap)."""
    n = len(replicas)
    for k, replica in enumerate(replicas):
        share = ids[k::n]
        for i in range(0, len(share), p.batch_size):
            chunk = share[i : i + p.batch_size]
            items = [{"kind": "function_job", "remote_id": r, "timeout_s": 86_400} for r in chunk]
            async with session.post(
                replica.url + "/v1/trackings/batch", json={"items": items}
            ) as resp:
                resp.raise_for_status()
                await resp.read()


async def _held(session: aiohttp.ClientSession, serve: Serve) -> int:
    async with session.get(serve.url + "/readyz") as resp:
        return int((await resp.json())["leases"])


async def _measure(
    session: aiohttp.ClientSession, replicas: list[Serve], sim: Simulator, cluster: Cluster,
    window_s: float,
) -> dict[str, Any]:  # fmt: skip
    before = [await scrape(session, r.url) for r in replicas]
    cpu0 = [cpu_seconds(r.pid) for r in replicas]
    db0, sim0, t0 = cluster.cpu(), cpu_seconds(sim.pid), time.monotonic()
    await asyncio.sleep(window_s)
    wall = time.monotonic() - t0
    db1, sim1 = cluster.cpu(), cpu_seconds(sim.pid)
    cpu = sum(cpu_seconds(r.pid) - c for r, c in zip(replicas, cpu0, strict=True))
    after = [await scrape(session, r.url) for r in replicas]
    polls = sum(a["polls"] - b["polls"] for a, b in zip(after, before, strict=True))
    db = Cluster.used(db0, db1)

    def merged(scrapes: list[dict[str, Any]]) -> dict[float, float]:
        out: dict[float, float] = {}
        for s in scrapes:
            for bound, n in s["lateness"].items():
                out[bound] = out.get(bound, 0.0) + n
        return out

    return {
        "polls_per_s": polls / wall,
        "replicas_cpu_ms_per_poll": 1000 * cpu / max(1.0, polls),
        "db_cpu_ms_per_poll": 1000 * db / max(1.0, polls),
        "cpu_ms_per_poll": 1000 * (cpu + db) / max(1.0, polls),
        "replicas_cores": cpu / wall,
        "db_cores": db / wall,
        "simulator_cores": (sim1 - sim0) / wall,
        "db_cpu_share": db / max(1e-9, cpu + db),
        "per_replica_polls_per_s": [
            (a["polls"] - b["polls"]) / wall for a, b in zip(after, before, strict=True)
        ],
        "lateness_p50_s": histogram_quantile(0.5, merged(before), merged(after)),
        "lateness_p99_s": histogram_quantile(0.99, merged(before), merged(after)),
    }


async def _sqlite(
    session: aiohttp.ClientSession, sim: Simulator, ids: list[str], p: Params, workdir: Path
) -> dict[str, Any]:
    db = workdir / "sqlite.db"
    serve = new_serve(workdir, "sqlite-intake", sim, db, polling(3600, 3600), p, 1e6)
    await serve.start(session)
    await intake(session, serve, ids, p)
    serve.terminate()
    serve = new_serve(workdir, "sqlite", sim, db, SATURATED, p, 1e6)
    await serve.start(session)
    await asyncio.sleep(2 * p.warmup_s)
    out = await measure_polls(session, serve, sim, p.window_s)
    serve.terminate()
    return out


async def _takeover(
    session: aiohttp.ClientSession, replicas: list[Serve], total: int
) -> dict[str, float]:
    """SIGKILL the last replica; until the others hold everything, and have read it."""
    victim, survivors = replicas[-1], replicas[:-1]
    held = await _held(session, victim)
    t0 = time.monotonic()
    victim.kill()
    held_at = read_at = None
    async with asyncio.timeout(LEASE_TIMEOUT_S * 10 + 60):
        while read_at is None:
            counts = [await _held(session, r) for r in survivors]
            now = time.monotonic()
            if held_at is None and sum(counts) >= total:
                held_at = now
            if held_at is not None:
                pending = [(await scrape(session, r.url))["resume_pending"] for r in survivors]
                if sum(pending) == 0:
                    read_at = now
            await asyncio.sleep(0.05)
    assert held_at is not None
    return {
        "takeover_trackings": held,
        "takeover_held_s": held_at - t0,
        "takeover_read_s": read_at - t0,
        "takeover_beyond_lease_timeout_s": held_at - t0 - LEASE_TIMEOUT_S,
    }


async def _events(
    session: aiohttp.ClientSession, sim: Simulator, p: Params, workdir: Path, cluster: Cluster
) -> dict[str, Any]:
    async with session.post(f"{sim.url}/_sim/reset") as resp:
        resp.raise_for_status()
    async with session.put(f"{sim.url}/_sim/settings", json={"request_log": True}) as resp:
        resp.raise_for_status()
    sink = MixSink()
    await sink.start(free_port())
    dsn = await cluster.schema("bench_events")
    replicas = _replicas(workdir, "events", 3, sim, dsn, POLICY, p, sink=sink.url)
    try:
        for r in replicas:
            await r.start(session)
        plan = await create_mix(session, sim.url, p.events, p.mix_scale, seed=7)
        for k, r in enumerate(replicas):
            await _intake(session, r.url, plan[k :: len(replicas)], p.batch_size)
        await _received(sink, plan)
        codes = [r.terminate() for r in replicas]
    finally:
        for r in replicas:
            if r.proc is not None and r.proc.poll() is None:
                r.proc.kill()
        await sink.close()
    latency = []
    for q in plan[:400]:
        at, _ = sink.received[q.tracking_id]
        terminal = q.created + q.terminal_s
        log = await _requests(session, sim.url, q.remote_id)
        reads = [r["t"] for r in log if r["status"] == 200 and r["t"] >= terminal]
        if reads:
            latency.append(at - reads[0])
    return {
        "event_latency_p50_s": quantile(latency, 0.5),
        "event_latency_p99_s": quantile(latency, 0.99),
        "events_expected": len(plan),
        "events_received": len(sink.received),
        "events_duplicates": sink.duplicates,
        "events_exit_codes": codes,
        "events_policy": POLICY,
    }


async def replicas_profile(
    session: aiohttp.ClientSession, sim: Simulator, ids: list[str], p: Params, workdir: Path
) -> dict[str, Any]:
    report: dict[str, Any] = {"lease_timeout_s": LEASE_TIMEOUT_S}
    sqlite = await _sqlite(session, sim, ids, p, workdir)
    report["sqlite_polls_per_s"] = sqlite["polls_per_s"]
    report["sqlite_cpu_ms_per_poll"] = sqlite["cpu_ms_per_poll"]
    cluster = Cluster(workdir / "pg")
    cluster.start()
    try:
        saturation: dict[str, dict[str, Any]] = {}
        for n in (1, 2, 3):
            dsn = await cluster.schema(f"bench_sat{n}")
            replicas = _replicas(workdir, f"sat{n}", n, sim, dsn, SATURATED, p)
            for r in replicas:
                await r.start(session)
            await _hand_over(session, replicas, ids, p)
            await asyncio.sleep(2 * p.warmup_s)
            saturation[str(n)] = await _measure(session, replicas, sim, cluster, p.window_s)
            saturation[str(n)]["exit_codes"] = [r.terminate() for r in replicas]
        one = saturation["1"]["polls_per_s"]
        for figures in saturation.values():
            figures["ratio_to_one"] = figures["polls_per_s"] / one
        report["saturation"] = saturation
        report["pg_cpu_ms_per_poll_1"] = saturation["1"]["cpu_ms_per_poll"]
        report["pg_over_sqlite_cpu_per_poll"] = (
            saturation["1"]["cpu_ms_per_poll"] / report["sqlite_cpu_ms_per_poll"]
        )
        report["db_cpu_share_3"] = saturation["3"]["db_cpu_share"]

        half_rate = saturation["3"]["polls_per_s"] / 2
        interval = len(ids) / half_rate
        dsn = await cluster.schema("bench_half")
        replicas = _replicas(workdir, "half", 3, sim, dsn, polling(interval, interval, 1.0, 0.2), p)
        for r in replicas:
            await r.start(session)
        await _hand_over(session, replicas, ids, p)
        await asyncio.sleep(interval + p.warmup_s)  # every tracking read once, then steady
        half = await _measure(session, replicas, sim, cluster, p.half_window_s)
        report["half"] = {"target_polls_per_s": half_rate, "interval_s": interval, **half}
        report["lateness_p50_s"] = half["lateness_p50_s"]
        report["lateness_p99_s"] = half["lateness_p99_s"]
        report.update(await _takeover(session, replicas, len(ids)))
        report["half_exit_codes"] = [r.terminate() for r in replicas[:-1]]
        report.update(await _events(session, sim, p, workdir, cluster))
    finally:
        cluster.stop()
    report["event_latency_target_s"] = 0.25 + POLICY["max_delay_s"]
    report["targets"] = {
        "lateness_p99_s": report["lateness_p99_s"] <= 0.5,
        "event_latency_p99_s": report["event_latency_p99_s"] <= report["event_latency_target_s"],
    }
    report["polls_per_db_core_s"] = {
        n: f["polls_per_s"] / max(1e-9, f["db_cores"]) for n, f in saturation.items()
    }
    report["polls_per_replica_core_s"] = {
        n: f["polls_per_s"] / max(1e-9, f["replicas_cores"]) for n, f in saturation.items()
    }
    report["median_ratio"] = statistics.median(f["ratio_to_one"] for f in saturation.values())
    return report


def replicas_table(r: dict[str, Any]) -> str:
    sat = r["saturation"]
    lines = [
        f"profile replicas: {r['parameters']['trackings']:,} trackings, {r['cpu_count']} cores"
    ]
    lines.append(
        f"  SQLite, one service: {r['sqlite_polls_per_s']:,.0f} polls/s,"
        f" {r['sqlite_cpu_ms_per_poll']:.4f} CPU ms/poll"
    )
    for n, f in sat.items():
        lines.append(
            f"  PostgreSQL, {n} replica(s): {f['polls_per_s']:,.0f} polls/s"
            f" (x{f['ratio_to_one']:.2f} of one), CPU ms/poll replicas"
            f" {f['replicas_cpu_ms_per_poll']:.4f} + database {f['db_cpu_ms_per_poll']:.4f},"
            f" database {f['db_cores']:.2f} cores ({100 * f['db_cpu_share']:.0f}% of the"
            f" service's CPU), replicas {f['replicas_cores']:.2f} cores,"
            f" simulator {f['simulator_cores']:.2f}"
        )
    lines += [
        f"  PostgreSQL / SQLite CPU per poll (one replica): {r['pg_over_sqlite_cpu_per_poll']:.2f}",
        f"  half saturation, 3 replicas: {r['half']['polls_per_s']:,.0f} polls/s,"
        f" lateness p50 {r['lateness_p50_s']:.4f} s, p99 {r['lateness_p99_s']:.4f} s (<= 0.5)",
        f"  takeover after SIGKILL of one of 3 ({r['takeover_trackings']} trackings, lease"
        f" timeout {r['lease_timeout_s']:.0f} s): held {r['takeover_held_s']:.2f} s,"
        f" read {r['takeover_read_s']:.2f} s",
        f"  event latency p50 {r['event_latency_p50_s']:.4f} s, p99"
        f" {r['event_latency_p99_s']:.4f} s (<= {r['event_latency_target_s']:.2f})",
        "  targets: "
        + ", ".join(f"{k}={'met' if v else 'NOT met'}" for k, v in r["targets"].items()),
    ]
    return "\n".join(lines)
