"""``orchestrator demo``: the simulator, the service and an event sink in one process tree.

The simulator and the sink run in this process's event loop; the service is a
real ``orchestrator serve`` child with a generated configuration, a temporary
SQLite file and an API token of its own. Everything started is stopped on the
way out, also on Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import tempfile
import time
from pathlib import Path

import aiohttp
from rich.console import Console
from rich.live import Live

from orchestrator.client import OrchestratorApiError, OrchestratorClient, Unavailable
from orchestrator.demo.plan import Plan, create_work, faults_fired, install_faults
from orchestrator.demo.progress import Display, Tally, summary
from orchestrator.demo.serve import ServeProcess
from orchestrator.demo.sink import EventSink, new_secret
from orchestrator.simulator import start_simulator

BATCH = 500
TICK_S = 0.25
# Longer than any scripted timeline plus the slowest deadline at the demo's pace.
RUN_LIMIT_S = 120.0
CANCEL_AFTER_S = 1.0
CANCEL_TRIES = 20


class Demo:
    def __init__(self, console: Console, count: int, seed: int | None, live: bool) -> None:
        self.console = console
        self.count = count
        self.seed = seed if seed is not None else random.randrange(1_000_000)
        self.live = live
        self.rng = random.Random(self.seed)
        self.serve: ServeProcess | None = None

    def say(self, text: str) -> None:
        self.console.print(f"[dim]·[/] {text}", highlight=False)

    async def run(self) -> int:
        with tempfile.TemporaryDirectory(prefix="orchestrator-demo-") as tmp:
            sim = await start_simulator(port=0, profile="fast", seed=self.seed)
            sink = EventSink(new_secret(), refuse_ratio=0.03, rng=random.Random(self.seed))
            try:
                self.say(f"simulated Moltaro workspace on {sim.url} (seed {self.seed})")
                await sink.start()
                self.say(f"event sink on {sink.url}, checking Standard Webhooks signatures")
                return await self._with_service(Path(tmp), sim.url, sink)
            finally:
                if self.serve is not None:
                    await self.serve.stop()
                await sink.close()
                await sim.close()

    async def _with_service(self, workdir: Path, sim_url: str, sink: EventSink) -> int:
        token = secrets.token_urlsafe(24)
        self.serve = ServeProcess(workdir, sim_url, sink.url, sink.secret, token)
        async with (
            aiohttp.ClientSession(trust_env=False) as session,
            OrchestratorClient(self.serve.url, token=token, session=session) as orch,
        ):
            await self.serve.start(orch)
            self.say(f"orchestrator serve on {self.serve.url} (SQLite in {workdir})")
            plan = await create_work(session, sim_url, self.count, self.rng)
            self.say(f"created {self.count} jobs and builds on the workspace")
            await install_faults(session, sim_url, plan)
            started = time.monotonic()
            tally = await self._submit(orch, plan)
            cancels = asyncio.create_task(self._cancel(orch, plan, tally), name="demo-cancels")
            try:
                done = await self._watch(orch, tally, sink, started)
            finally:
                cancels.cancel()
                await asyncio.gather(cancels, return_exceptions=True)
            elapsed = time.monotonic() - started
            tally.read_metrics(await orch.metrics())
            fired = await faults_fired(session, sim_url)
        code = await self.serve.stop()
        summary(self.console, tally, sink.stats, elapsed, fired, table=not self.live)
        if code != 0:
            self.console.print(f"[red]orchestrator serve exited {code}[/]\n{self.serve.log_tail()}")
        ok = done and sink.stats.delivered == tally.total and sink.stats.bad_signature == 0
        if not ok:
            self.console.print("[red]the demo did not finish cleanly[/]")
        return 0 if ok and code == 0 else 1

    async def _submit(self, orch: OrchestratorClient, plan: Plan) -> Tally:
        planned = {}
        created = 0
        for start in range(0, len(plan.items), BATCH):
            chunk = plan.items[start : start + BATCH]
            answers = await orch.track_batch([p.intake for p in chunk])
            for item, answer in zip(chunk, answers, strict=True):
                if answer.tracking is None:
                    raise RuntimeError(f"intake refused {item.scenario}: {answer.problem}")
                planned[answer.tracking.tracking_id] = item
                created += answer.created
        self.say(
            f"submitted {len(planned)} through POST /v1/trackings/batch ({created} new); "
            "waiting for every outcome"
        )
        return Tally(planned)

    async def _cancel(self, orch: OrchestratorClient, plan: Plan, tally: Tally) -> None:
        """Cancel the jobs planned for it, as a caller would, while Moltaro allows it."""
        await asyncio.sleep(CANCEL_AFTER_S)
        targets = [tid for tid, p in tally.planned.items() if p.cancel]
        for tracking_id in targets:
            tally.cancels_asked += 1
            for _ in range(CANCEL_TRIES):
                try:
                    await orch.cancel(tracking_id)
                    tally.cancels_accepted += 1
                    break
                except OrchestratorApiError as exc:
                    # 502/503: the fresh status read met an injected fault; ask again.
                    if exc.status not in (502, 503):
                        tally.cancel_refusals.append(str(exc))
                        break
                    wait = exc.retry_after if isinstance(exc, Unavailable) else None
                    await asyncio.sleep(wait or 0.3)
            else:
                tally.cancel_refusals.append("the workspace kept failing the fresh read")

    async def _watch(
        self, orch: OrchestratorClient, tally: Tally, sink: EventSink, started: float
    ) -> bool:
        display = Display(self.console, tally.total, self.live)
        after = 0
        last_metrics = 0.0

        def complete() -> bool:
            return len(tally.ended) >= tally.total and sink.stats.delivered >= tally.total

        async def tick() -> bool:
            nonlocal after, last_metrics
            while True:
                page = await orch.events(after=after, limit=1000)
                for event in page.events:
                    tally.add(event)
                after = page.next_after
                if len(page.events) < 1000:
                    break
            now = time.monotonic()
            if now - last_metrics >= 0.5:
                tally.read_metrics(await orch.metrics())
                last_metrics = now
            return complete()

        if self.live:
            with Live(console=self.console, auto_refresh=False, transient=False) as live:
                while time.monotonic() - started < RUN_LIMIT_S:
                    finished = await tick()
                    elapsed = time.monotonic() - started
                    live.update(display.renderable(tally, sink.stats, elapsed), refresh=True)
                    if finished:
                        return True
                    await asyncio.sleep(TICK_S)
            return False
        while time.monotonic() - started < RUN_LIMIT_S:
            finished = await tick()
            display.plain(tally, sink.stats, time.monotonic() - started, force=finished)
            if finished:
                return True
            await asyncio.sleep(TICK_S)
        return False
