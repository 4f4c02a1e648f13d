"""A soak: steady intake against ``simulate --profile fast`` with run history on.

Starts the simulator and ``orchestrator serve`` (SQLite in a temporary folder,
the product's default polling; or, with ``--replicas N``, N replicas sharing a
throwaway PostgreSQL cluster), enqueues jobs on the simulator and tracks each
at ``--rate`` a second for ``--minutes`` (intake taking turns among the
replicas, from when each holds its leases and sees the others), then stops
intake and waits for every tracking to end. Every 10 s it samples each process:
active trackings, ended trackings, RSS, open files, the database's size, and
intake-to-terminal times. It counts terminal events per tracking from the feed
(every tracking must end exactly once). With replicas it also reads their
leases (bench/lease_figures.py): warnings about leases in their logs, the
leases gauge right after the drain, and from the simulator's request log every
job whose reader changed within a lease timeout; a lease taken over or handed
back, or any of these, fails the run. Prints a summary and writes every sample
with ``--out``. Started by hand (it is not a CI test); all traffic stays on
127.0.0.1, and the run is bounded by its duration plus ``--drain-s``.

Terminal trackings are kept ``--retention-s`` (600 s here, a week by default in
the product), so the database reaches its steady size within the run.

    python scripts/soak.py --minutes 60 --rate 60 --out soak-sqlite.json
    python scripts/soak.py --minutes 60 --rate 60 --replicas 2 --out soak-pg.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.lease_figures import all_holding, lease_metrics, log_warnings, shared_reads
from bench.procs import Serve, Simulator, free_port, kill_spawned, rss_bytes, serve_config
from bench.replicas_phase import Cluster

# The simulator's two enqueueable Job functions (its catalog refuses an enqueue of
# totals.recalculate: a Command contract behind an Enqueue publication).
KEYS = ("billing.sync-invoices", "reports.nightly-export")
SAMPLE_S = 10.0
LEASE_TIMEOUT_S = 30.0  # the product's default


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def active_now(session: aiohttp.ClientSession, serve: Serve) -> float:
    async with session.get(f"{serve.url}/metrics") as resp:
        text = await resp.text()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("orchestrator_trackings_active{")
    )


class Feed:
    """Terminal events from the service's feed, as they come."""

    def __init__(self) -> None:
        self.after = 0
        self.ended: dict[str, dict[str, Any]] = {}
        self.terminal_events: Counter[str] = Counter()  # per tracking: must be 1
        self.latencies: list[tuple[float, float]] = []  # (terminal_at, seconds from intake)

    async def read(self, session: aiohttp.ClientSession, serve: Serve) -> None:
        while True:
            url = f"{serve.url}/v1/events?after={self.after}&limit=1000"
            async with session.get(url) as resp:
                page = await resp.json()
            for event in page["events"]:
                data = event["data"]
                if data["state"] == "terminal":
                    self.terminal_events[data["tracking_id"]] += 1
                    self.ended[data["tracking_id"]] = data
                    took = _ts(data["terminal_at"]) - _ts(data["created_at"])
                    self.latencies.append((_ts(data["terminal_at"]), took))
            if page["next_after"] == self.after:
                return
            self.after = page["next_after"]


def _ts(text: str) -> float:
    from orchestrator.clock import parse_iso

    return parse_iso(text)


async def intake(
    session: aiohttp.ClientSession, sim: Simulator, serves: list[Serve], n: int, made: list[str]
) -> None:
    async def one(i: int) -> None:
        key = KEYS[i % len(KEYS)]
        serve = serves[i % len(serves)]
        url = f"{sim.url}/api/workspace/functions/{key}/enqueue"
        async with session.post(url, json={}) as resp:
            answer = await resp.json()
        body = {"kind": "function_job", "enqueue_response": answer, "timeout_s": 3600}
        async with session.post(f"{serve.url}/v1/trackings", json=body) as resp:
            tracking = await resp.json()
            assert resp.status == 201, tracking
        made.append(tracking["tracking_id"])

    await asyncio.gather(*(one(len(made) + i) for i in range(n)))


class Store:
    """Where the trackings live, and how big it is."""

    def __init__(self, workdir: Path, replicas: int) -> None:
        self.db = workdir / "orchestrator.db"
        self.cluster = Cluster(workdir / "pg") if replicas else None
        self.dsn = ""

    def start(self) -> None:
        if self.cluster is not None:
            self.dsn = self.cluster.start()

    async def size_mib(self) -> float:
        if self.cluster is None:
            files = [self.db, self.db.with_name(self.db.name + "-wal")]
            return round(sum(f.stat().st_size for f in files if f.exists()) / 2**20, 2)
        import asyncpg  # type: ignore[import-untyped]

        conn = await asyncpg.connect(self.dsn)
        try:
            size = await conn.fetchval("SELECT pg_database_size(current_database())")
        finally:
            await conn.close()
        return round(float(size) / 2**20, 2)

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()


async def soak(
    minutes: float, rate: float, drain_s: float, replicas: int, retention_s: float, workdir: Path
) -> dict[str, Any]:
    samples: list[dict[str, Any]] = []
    made: list[str] = []
    feed = Feed()
    store = Store(workdir, replicas)
    store.start()
    connector = aiohttp.TCPConnector(limit=64)
    async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:
        sim = Simulator(workdir, profile="fast")
        await sim.start(session)
        serves = []
        for i in range(max(1, replicas)):
            port = free_port()
            replica = None
            if replicas:
                replica = {"url": store.dsn, "replica_id": f"soak-{i}", "lease_timeout_s": LEASE_TIMEOUT_S,
                           "stall_lag_s": 5}  # fmt: skip
            cfg = serve_config(
                workdir / f"serve-{i}.toml", port=port, db=store.db,
                sim_url=sim.url, polling={}, max_in_flight=64, rate=500, replica=replica,
            )  # fmt: skip
            cfg.write_text(cfg.read_text() + f"[events]\nretention_s = {retention_s}\n")
            serves.append(Serve(cfg, port, workdir / f"serve-{i}.log"))
        for serve in serves:
            await serve.start(session)
        if replicas:
            await all_holding(session, [s.url for s in serves], 3 * LEASE_TIMEOUT_S)
        serve = serves[0]  # the feed: one log, shared by replicas
        drained_in = None
        leases: dict[str, Any] = {}
        try:
            started = time.monotonic()
            until = started + minutes * 60
            next_sample = started + SAMPLE_S
            tick = 0.1
            owed = 0.0
            while (now := time.monotonic()) < until:
                owed += rate * tick
                n = int(owed)
                owed -= n
                await intake(session, sim, serves, n, made)
                if now >= next_sample:
                    next_sample += SAMPLE_S
                    await feed.read(session, serve)
                    samples.append(await sample(session, serves, store, feed, made, started))
                await asyncio.sleep(max(0.0, tick - (time.monotonic() - now)))
            await feed.read(session, serve)
            at_stop = await sample(session, serves, store, feed, made, started)
            samples.append(at_stop)
            async with asyncio.timeout(drain_s):
                while len(feed.ended) < len(made):
                    await asyncio.sleep(1.0)
                    await feed.read(session, serve)
                drained_in = time.monotonic() - until
            if replicas:  # the gauges the moment the last tracking has ended
                leases["after_drain"] = [await lease_metrics(session, s.url) for s in serves]
            samples.append(await sample(session, serves, store, feed, made, started))
        except TimeoutError:
            samples.append(await sample(session, serves, store, feed, made, started))
        try:
            if replicas:
                rids = [t["remote_id"] for t in feed.ended.values()]
                leases["reads"] = await shared_reads(session, sim.url, rids, LEASE_TIMEOUT_S)
        finally:
            exit_codes = [s.terminate() for s in serves]
            sim.stop()
            store.stop()
    if replicas:
        leases["warnings"] = [log_warnings(s.log) for s in serves]
    result = report(samples, at_stop, feed, made, rate, drained_in, exit_codes, retention_s)
    return {**result, "leases": leases} if replicas else result


async def sample(
    session: aiohttp.ClientSession,
    serves: list[Serve],
    store: Store,
    feed: Feed,
    made: list[str],
    started: float,
) -> dict[str, Any]:
    now = time.time()
    recent = [took for at, took in feed.latencies if at >= now - SAMPLE_S]
    return {
        "t": round(time.monotonic() - started, 1),
        "intake": len(made),
        "ended": len(feed.ended),
        "active": sum([await active_now(session, s) for s in serves]),
        "leases": [await lease_metrics(session, s.url) for s in serves] if store.cluster else None,
        "rss_mib": [round(rss_bytes(s.pid) / 2**20, 1) for s in serves],
        "open_files": [open_files(s.pid) for s in serves],
        "db_mib": await store.size_mib(),
        "ended_per_s": round(len(recent) / SAMPLE_S, 1),
        "intake_to_terminal_p50_s": round(statistics.median(recent), 2) if recent else None,
        "intake_to_terminal_max_s": round(max(recent), 2) if recent else None,
    }


def report(
    samples: list[dict[str, Any]],
    at_stop: dict[str, Any],
    feed: Feed,
    made: list[str],
    rate: float,
    drained_in: float | None,
    exit_codes: list[int],
    retention_s: float,
) -> dict[str, Any]:
    warm = [s for s in samples if s["t"] >= 60]
    # The database is full once the oldest terminal trackings are pruned (every 60 s).
    full = [s for s in samples if s["t"] >= retention_s + 120]

    def spread(key: str) -> list[list[float]] | None:
        """Per process: [first value after warm-up, highest value after it]."""
        if not warm:
            return None
        return [[warm[0][key][i], max(s[key][i] for s in warm)] for i in range(len(warm[0][key]))]

    outcomes = Counter(t["outcome"] for t in feed.ended.values())
    attempts = Counter(
        len((t.get("result") or {}).get("attempts") or []) for t in feed.ended.values()
    )
    return {
        "intake": len(made),
        "ended": len(feed.ended),
        "never_ended": len(set(made) - set(feed.ended)),
        "ended_twice": sum(1 for n in feed.terminal_events.values() if n > 1),
        "outcomes": dict(outcomes),
        "attempts_per_job": {str(k): v for k, v in sorted(attempts.items())},
        "active_at_stop": at_stop["active"],
        "work_active_at_stop_s": round(at_stop["active"] / rate, 2),
        "drained_in_s": None if drained_in is None else round(drained_in, 1),
        "rss_mib_after_warmup": spread("rss_mib"),
        "open_files_after_warmup": spread("open_files"),
        "db_mib_after_retention": [full[0]["db_mib"], max(s["db_mib"] for s in full)] if full else None,
        "intake_to_terminal_p50_s": statistics.median(t for _, t in feed.latencies) if feed.latencies else None,
        "intake_to_terminal_max_s": max((t for _, t in feed.latencies), default=None),
        "serve_exit_codes": exit_codes,
        "samples": samples,
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--minutes", type=float, default=8.0)
    parser.add_argument("--rate", type=float, default=60.0, help="trackings a second")
    parser.add_argument("--drain-s", type=float, default=180.0)
    parser.add_argument("--retention-s", type=float, default=600.0, help="events.retention_s")
    parser.add_argument(
        "--replicas", type=int, default=0, help="0: one process on SQLite; N: N on PostgreSQL"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        try:
            result = asyncio.run(
                soak(
                    args.minutes,
                    args.rate,
                    args.drain_s,
                    args.replicas,
                    args.retention_s,
                    Path(tmp),
                )
            )
        finally:
            kill_spawned()
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2))
    for s in result["samples"]:
        print(json.dumps(s))
    summary = {k: v for k, v in result.items() if k != "samples"}
    print(json.dumps(summary, indent=2))
    ok = (
        result["never_ended"] == 0
        and result["ended_twice"] == 0
        and result["work_active_at_stop_s"] < 5
        and (not args.replicas or leases_held(result["leases"]))
    )
    return 0 if ok else 1


def leases_held(leases: dict[str, Any]) -> bool:
    """No lease trouble among healthy replicas: no warning about leases, no lease that
    changed hands (taken over or handed back), no job whose reader changed within a
    lease timeout, every leases gauge at 0 after the drain."""
    moved = ("lease_takeovers_total", "lease_handovers_total")
    return (
        all(w["lease_count"] == 0 for w in leases["warnings"])
        and all(m[k] == 0 for m in leases.get("after_drain", []) for k in moved)
        and leases.get("reads", {}).get("reader_changed_within_lease_timeout", 1) == 0
        and all(
            m["replica_leases"] == 0 for m in leases.get("after_drain", [{"replica_leases": 1}])
        )
    )


if __name__ == "__main__":
    sys.exit(main())
