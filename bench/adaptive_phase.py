"""Adaptive polling beside the backoff: two services on the same jobs, in one run.

Scripted jobs of a few work classes (their durations drawn per function key
from the simulator's ``bench`` profile: some tight, one spread, one that
drifts halfway through) arrive over ``adaptive_arrive_s``, so later jobs of a
class find the durations of earlier ones. Every job is tracked by two fresh
services at once, one with ``polling.adaptive`` on (given the job's
``function_key``), one with it off, each delivering to its own sink. Reads per
terminal are the ``polls`` of each terminal event; the delay is the sink's
receive time less the job's scripted terminal time.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.events_phase import quantile
from bench.mix import Planned, Sink
from bench.phases import Params, new_serve, polling
from bench.procs import Serve, Simulator, free_port
from orchestrator.simulator.profiles import builtin_profiles

POLICY = polling(0.5, 8.0)
CLASSES = (
    "bench.adaptive.brief",
    "bench.adaptive.steady",
    "bench.adaptive.long",
    "bench.adaptive.spread",
    "bench.adaptive.drift",
)
DRIFTS = "bench.adaptive.drift"


def timeline(key: str, late: bool, rng: random.Random, scale: float) -> list[dict[str, Any]]:
    behaviour = builtin_profiles()["bench"].job_for(f"{key}.later" if late else key)
    pickup = behaviour.pickup_s.draw(rng)
    run = behaviour.duration_s.draw(rng) * scale
    return [
        {"after_s": 0.0, "status": "Queued"},
        {"after_s": pickup, "status": "Leased"},
        {"after_s": pickup + run, "status": "Completed", "run": {"Status": "Success"}},
    ]


async def _post(session: aiohttp.ClientSession, url: str, item: dict[str, Any]) -> str:
    async with session.post(f"{url}/v1/trackings", json=item) as resp:
        resp.raise_for_status()
        return str((await resp.json())["tracking_id"])


async def _feed(
    session: aiohttp.ClientSession, sim: str, sides: dict[str, Serve], p: Params
) -> tuple[list[Planned], dict[str, dict[str, Planned]], dict[str, str]]:
    rng = random.Random(11)
    plan: list[Planned] = []
    by_side: dict[str, dict[str, Planned]] = {side: {} for side in sides}
    classes: dict[str, str] = {}  # remote id -> its function key
    start = time.monotonic()
    for i in range(p.adaptive_jobs):
        await asyncio.sleep(
            max(0.0, start + i * p.adaptive_arrive_s / p.adaptive_jobs - time.monotonic())
        )
        key = CLASSES[i % len(CLASSES)]
        steps = timeline(key, key == DRIFTS and i >= p.adaptive_jobs // 2, rng, p.mix_scale)
        t0 = time.time()
        async with session.post(
            f"{sim}/_sim/script", json={"kind": "function_job", "steps": steps, "function_key": key}
        ) as resp:
            resp.raise_for_status()
            rid = (await resp.json())["id"]
        job = Planned(rid, (t0 + time.time()) / 2, [], steps[-1]["after_s"])
        classes[rid] = key
        plan.append(job)
        base = {"kind": "function_job", "remote_id": rid, "timeout_s": 600}
        items = {"adaptive": {**base, "function_key": key}, "backoff": base}
        ids = await asyncio.gather(*(_post(session, s.url, items[n]) for n, s in sides.items()))
        for side, tracking_id in zip(sides, ids, strict=True):
            by_side[side][tracking_id] = job
    return plan, by_side, classes


def _figures(side: str, sink: Sink, jobs: dict[str, Planned]) -> dict[str, float]:
    reads, delays = [], []
    for tracking_id, job in jobs.items():
        at, data = sink.received[tracking_id]
        reads.append(int(data.get("polls", 0)))
        delays.append(at - (job.created + job.terminal_s))
    return {
        f"{side}_reads_per_terminal": statistics.fmean(reads),
        f"{side}_delay_p50_s": quantile(delays, 0.5),
        f"{side}_delay_p95_s": quantile(delays, 0.95),
        f"{side}_delay_p99_s": quantile(delays, 0.99),
    }


async def adaptive(
    session: aiohttp.ClientSession, sim: Simulator, p: Params, workdir: Path
) -> dict[str, Any]:
    sinks = {"adaptive": Sink(), "backoff": Sink()}
    sides: dict[str, Serve] = {}
    for side, sink in sinks.items():
        await sink.start(free_port())
        pol = {**POLICY, "adaptive.enabled": side == "adaptive"}
        sides[side] = new_serve(
            workdir, f"adaptive-{side}", sim, workdir / f"adaptive-{side}.db", pol, p, 1e6,
            sink=sink.url,
        )  # fmt: skip
    codes = {}
    try:
        for serve in sides.values():
            await serve.start(session)
        plan, by_side, classes = await _feed(session, sim.url, sides, p)
        last = max(q.created + q.terminal_s for q in plan)
        async with asyncio.timeout(max(0.0, last - time.time()) + 60):
            while any(
                t not in sinks[side].received for side, jobs in by_side.items() for t in jobs
            ):
                await asyncio.sleep(0.05)
        codes = {side: serve.terminate() for side, serve in sides.items()}
    finally:
        for serve in sides.values():
            if serve.proc is not None and serve.proc.poll() is None:
                serve.proc.kill()
        for sink in sinks.values():
            await sink.close()
    report: dict[str, Any] = {
        "adaptive_jobs": len(plan),
        "adaptive_classes": len(CLASSES),
        "adaptive_exit_codes": codes,
        "adaptive_policy": POLICY,
    }
    for side, jobs in by_side.items():
        report.update(_figures(side, sinks[side], jobs))
        per_class: dict[str, list[int]] = {}
        for tracking_id, job in jobs.items():
            polls = int(sinks[side].received[tracking_id][1].get("polls", 0))
            per_class.setdefault(classes[job.remote_id], []).append(polls)
        report[f"{side}_reads_by_class"] = {k: statistics.fmean(v) for k, v in per_class.items()}
    # The same over the second half, once the classes have had time to be learned.
    late = {side: dict(list(jobs.items())[len(jobs) // 2 :]) for side, jobs in by_side.items()}
    for side, jobs in late.items():
        figures = _figures(side, sinks[side], jobs)
        report.update({k.replace(side, f"{side}_late", 1): v for k, v in figures.items()})
    return report
