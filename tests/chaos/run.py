"""One chaos run: platform faults, SIGKILLs, a dead workspace, hostile input, checked against truth.

``run_chaos`` is what both ``tests/chaos/test_chaos.py`` (a CI-sized run) and
``scripts/chaos.py`` (a larger run started by hand) call.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

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
    set_wire,
    wait_until_settled,
    write_config,
)
from tests.chaos.report import ChaosReport, check, leaked
from tests.security.catalog import hostile_intake_bodies
from tests.serveproc import ServeProcess, free_port


@dataclass
class ChaosOptions:
    trackings: int = 90
    kills: int = 6
    down_trackings: int = 4
    down_timeout_s: float = 6.0
    seed: int = 1
    faults: bool = True
    hostile: bool = True
    sink_fail_ratio: float = 0.1
    batch: int = 5
    settle_timeout_s: float = 90.0
    max_delay_s: float = 0.3


async def _intake(
    client: Client, plan: Plan, batch: int, acknowledged: set[str], attempts: Counter[str]
) -> None:
    """Hand every planned item over, retrying a batch whose answer was lost to a kill."""
    for start in range(0, len(plan.items), batch):
        items = plan.items[start : start + batch]
        while True:
            attempts["batches"] += 1
            try:
                status, body = await client.post("/v1/trackings/batch", {"items": items})
            except (aiohttp.ClientError, OSError):
                await asyncio.sleep(0.1)  # killed mid-request: the same batch again
                continue
            if status != 200:
                await asyncio.sleep(0.1)
                continue
            for item in body["items"]:
                assert item["status"] in (200, 201), item
                acknowledged.add(item["tracking"]["tracking_id"])
            break
        # Paced so that the first kills land while batches are in flight.
        await asyncio.sleep(0.03)


async def _hostile(client: Client, sim_url: str, callback_prefix: str) -> tuple[int, list[str]]:
    tried, wrong = 0, []
    for name, body in hostile_intake_bodies(sim_url, callback_prefix):
        while True:
            try:
                status, answer = await client.post("/v1/trackings", body)
                break
            except (aiohttp.ClientError, OSError):
                await asyncio.sleep(0.1)
        tried += 1
        if not 400 <= status < 500 or not isinstance(answer, dict) or "title" not in answer:
            wrong.append(f"{name}: {status}")
    return tried, wrong


async def run_chaos(
    workdir: Path, options: ChaosOptions, say: Callable[[str], None] = lambda _: None
) -> tuple[ChaosReport, dict[str, Any]]:
    """Run, check against the truth, return the report and the raw figures behind it."""
    rng = random.Random(options.seed)
    secrets = Secrets()
    sink = Sink(
        secrets.sink_secret,
        fail_ratio=options.sink_fail_ratio,
        seed=options.seed,
        callback_secret=secrets.callback_secret,
    )
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=options.seed)
    serve: ServeProcess | None = None
    report = ChaosReport()
    figures: dict[str, Any] = {}
    try:
        sink_url = await sink.start()
        down_url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
        port = free_port()
        cfg = write_config(
            workdir,
            port=port,
            sim_url=sim.url,
            store_path=workdir / "orch.db",
            sink_url=sink_url,
            down_url=down_url,
            callback_prefix=sink.url + "/callbacks",
            max_delay_s=options.max_delay_s,
        )
        serve = ServeProcess(cfg, port, workdir / "serve.log", secrets.env())
        async with aiohttp.ClientSession() as session:
            client = Client(session, serve.url, secrets.api_token)
            await serve.start(session)
            plan = await scripted_plan(session, sim.url, options.trackings, rng)
            for i in range(options.down_trackings):
                plan.add(
                    "down",
                    "function_job",
                    f"J-down-{i}",
                    "deadline_exceeded",
                    timeout_s=options.down_timeout_s,
                )
            rng.shuffle(plan.items)
            if options.faults:
                await set_faults(session, sim.url, PLATFORM_FAULTS)
            say(f"planned {len(plan.truth)} trackings; serve pid {serve.proc and serve.proc.pid}")

            acknowledged: set[str] = set()
            attempts: Counter[str] = Counter()
            started = time.monotonic()
            intake = asyncio.create_task(
                _intake(client, plan, options.batch, acknowledged, attempts)
            )
            phases: Counter[str] = Counter()
            down_polls = 0.0
            hostile_task = None
            if options.hostile:
                hostile_task = asyncio.create_task(
                    _hostile(client, sim.url, sink.url + "/callbacks")
                )
            for k in range(options.kills):
                # The first kills land during intake; later ones while polling
                # and delivering. The wire format flips between kills.
                await asyncio.sleep(rng.uniform(0.05, 0.4) if k < 2 else rng.uniform(0.3, 1.5))
                try:
                    active = await client.active_count()
                except (aiohttp.ClientError, AssertionError):
                    active = -1
                phase = "intake" if not intake.done() else ("polling" if active else "delivery")
                phases[phase] += 1
                # Counters restart with the process: add up each life's figures.
                with contextlib.suppress(aiohttp.ClientError):
                    down_polls += metric_sum(
                        await client.metrics(), "orchestrator_polls_total", workspace="down"
                    )
                serve.kill()
                await set_wire(session, sim.url, camel=bool(k % 2), names=bool((k // 2) % 2))
                await serve.start(session)
                say(f"kill {k + 1}/{options.kills} during {phase}; restarted")
            await intake
            hostile_tried, hostile_wrong = (await hostile_task) if hostile_task else (0, [])
            await set_wire(session, sim.url, camel=True, names=True)

            expected_terminal = len(plan.truth)
            await wait_until_settled(client, sink, expected_terminal, options.settle_timeout_s)
            elapsed = time.monotonic() - started
            hits = await fault_hits(session, sim.url)
            trackings = await client.trackings()
            events = await client.events()
            metrics = await client.metrics()
            async with session.get(f"{sim.url}/_sim/stats") as resp:
                sim_stats = await resp.json()
            code = serve.terminate()
            assert code == 0, serve.tail()

        log_text = serve.tail(10**9)
        check(
            report,
            plan.truth,
            acknowledged,
            trackings,
            events,
            sink.terminal_ids(),
            sink.terminal_hits(),
        )
        report.kills_survived = serve.kills
        report.faults_injected = dict(hits)
        report.faults_injected["camelCase/enum-name flips"] = options.kills + 1
        down_polls += metric_sum(metrics, "orchestrator_polls_total", workspace="down")
        report.faults_injected["unreachable workspace (polls refused)"] = int(down_polls)
        report.hostile_inputs_tried = hostile_tried
        report.hostile_inputs_accepted_wrongly = len(hostile_wrong)
        report.examples += hostile_wrong
        report.bad_signatures = sink.bad_signatures
        report.sink_refusals = sink.refused
        report.secrets_leaked = leaked(
            secrets.values(), log_text, str(events), metrics, str(trackings)
        )
        report.notes.append(f"kills by phase: {dict(phases)}")
        report.notes.append(f"intake batch attempts: {attempts['batches']}")
        report.notes.append(f"run time: {elapsed:.1f}s")
        figures = {
            "elapsed_s": elapsed,
            "down_polls": down_polls,
            "sim_stats": sim_stats,
            "metrics": metrics,
        }
        return report, figures
    finally:
        if serve is not None:
            serve.ensure_dead()
        await sink.close()
        await sim.close()
