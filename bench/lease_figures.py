"""What a run of several replicas says about their leases (scripts/soak.py --replicas).

Three figures, each read from outside the replicas:

- from each replica's log (JSON, WARNING and up): every warning, by message, and the
  sum of the ``count`` field of those about leases;
- from each replica's ``/metrics`` at every sample and right after the drain: the
  leases gauge beside the active trackings, and the lease counters (lost by reason,
  takeovers, hand-overs);
- from the simulator's request log, which names the replica of every read
  (``X-Orchestrator-Replica``): the jobs read by two replicas, and those whose
  reader changed within a lease timeout (in steady state there should be none).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

# Read back per job (the simulator's log keeps every id of a run this size).
CONCURRENT_LOOKUPS = 16


def log_warnings(path: Path) -> dict[str, Any]:
    """Warnings and worse in a replica's JSON log, by message; ``lease_count``: the
    sum of the ``count`` field of those whose message names leases."""
    by_msg: Counter[str] = Counter()
    lease_count = 0
    for line in path.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("level") not in ("warning", "error", "critical"):
            continue
        msg = str(record.get("msg", ""))
        by_msg[msg] += 1
        if "lease" in msg:
            lease_count += int(record.get("count", 0) or 0)
    return {"by_message": dict(by_msg), "lease_count": lease_count}


def metric_values(text: str, name: str) -> dict[str, float]:
    """Every series of ``name`` in a Prometheus text, by its label text ('' for none)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            series, value = line.rsplit(" ", 1)
            out[series[len(name) :]] = float(value)
    return out


async def lease_metrics(session: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with session.get(f"{url}/metrics") as resp:
        text = await resp.text()

    def total(name: str) -> float:
        return sum(metric_values(text, name).values())

    return {
        "replica_leases": total("orchestrator_replica_leases"),
        "trackings_active": total("orchestrator_trackings_active"),
        "leases_lost_total": metric_values(text, "orchestrator_leases_lost_total"),
        "lease_takeovers_total": total("orchestrator_lease_takeovers_total"),
        "lease_handovers_total": total("orchestrator_lease_handovers_total"),
    }


async def all_holding(session: aiohttp.ClientSession, urls: list[str], bound_s: float) -> None:
    """Until every replica holds its leases and sees all the others (``/readyz``), so
    that intake starts in steady state: a replica still joining reads nothing, piles
    up the work it accepts and hands it back once it holds (a join's hand-overs)."""
    async with asyncio.timeout(bound_s):
        while True:
            states = []
            for url in urls:
                async with session.get(f"{url}/readyz") as resp:
                    states.append(await resp.json())
            if all(
                s.get("lease_state") == "holding" and len(s["peers"]) == len(urls) for s in states
            ):
                return
            await asyncio.sleep(0.5)


async def shared_reads(
    session: aiohttp.ClientSession, sim_url: str, remote_ids: list[str], lease_timeout_s: float
) -> dict[str, Any]:
    """Jobs whose status reads came from more than one replica, and those whose reader
    changed less than a lease timeout after the other's last read."""
    gate = asyncio.Semaphore(CONCURRENT_LOOKUPS)
    shared = 0
    close: list[dict[str, Any]] = []
    unnamed = 0

    async def one(rid: str) -> None:
        nonlocal shared, unnamed
        async with gate, session.get(f"{sim_url}/_sim/requests", params={"id": rid}) as resp:
            rows = (await resp.json())["requests"]
        reads = sorted((r["t"], r["replica"]) for r in rows if r["route"] == "job_status")
        unnamed += sum(1 for _, who in reads if who is None)
        if len({who for _, who in reads}) > 1:
            shared += 1
        for (t0, a), (t1, b) in itertools.pairwise(reads):
            if a != b and t1 - t0 < lease_timeout_s:
                close.append({"remote_id": rid, "from": a, "to": b, "gap_s": round(t1 - t0, 3)})

    await asyncio.gather(*(one(rid) for rid in remote_ids))
    return {
        "jobs_checked": len(remote_ids),
        "reads_without_replica": unnamed,
        "jobs_read_by_two_replicas": shared,
        "reader_changed_within_lease_timeout": len(close),
        "examples": close[:10],
    }
