"""``orchestrator demo``: see the orchestrator work in under a minute.

    run_demo(count=300, seed=None, live=True) -> exit code

Starts the bundled simulator, a real ``orchestrator serve`` and a signature-
checking event sink; creates ``count`` jobs and builds with a realistic mix;
tracks them through the batch intake; shows progress; prints a summary.

The simulator and the sink run in this process's event loop; the service is a
child with a generated configuration, a temporary SQLite file and an API token
of its own. Everything started is stopped on the way out, also on Ctrl-C and
SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import secrets
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from rich.console import Console
from rich.live import Live

from orchestrator.aio import run_async
from orchestrator.client import OrchestratorApiError, OrchestratorClient, Unavailable
from orchestrator.demo.plan import Plan, create_work, faults_fired, sim_call
from orchestrator.demo.progress import Display, EventSink, Tally, new_secret, summary
from orchestrator.simulator import start_simulator

BATCH = 500
GROUP = "demo"  # the group of every tracking the demo submits (a fresh store each run)
TICK_S = 0.25
# Longer than any scripted timeline plus the slowest deadline at the demo's pace.
RUN_LIMIT_S = 120.0
CANCEL_AFTER_S = 1.0
CANCEL_TRIES = 20
# Polling fast enough that a few hundred short jobs end in seconds; event
# retries fast enough that the sink's refusals are redelivered in the demo.
_CONFIG = """
[server]
listen = "127.0.0.1:{port}"
api_tokens_env = "ORCH_API_TOKENS"
shutdown_grace_s = 3
shutdown_hard_s = 2

[store]
path = "{db}"
synchronous = "NORMAL"

[polling]
initial_delay_s = 0.2
max_delay_s = 1.0
multiplier = 1.6
jitter = 0.2
default_deadline_s = 120
not_found_confirmations = 3
not_found_min_s = 1.0

[logging]
format = "json"
level = "WARNING"

[[workspaces]]
name = "default"
base_url = "{sim_url}"
request_timeout_s = 2
max_in_flight = 64
max_requests_per_second = 1000

[events]
retry_schedule_s = [0.3, 1, 2]
delivery_timeout_s = 5

[[events.sinks]]
name = "demo"
url = "{sink_url}"
secret_env = "ORCH_SINK_SECRET"
max_age_s = 600
"""


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
            await sim_call(session, "PUT", f"{sim_url}/_sim/faults", {"rules": plan.faults})
            started = time.monotonic()
            tally = await self._submit(orch, plan)
            cancels = asyncio.create_task(self._cancel(orch, tally), name="demo-cancels")
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
        # One event per tracking and the group's one.
        ok = done and sink.stats.delivered == tally.total + 1 and sink.stats.bad_signature == 0
        if not ok:
            self.console.print("[red]the demo did not finish cleanly[/]")
        return 0 if ok and code == 0 else 1

    async def _submit(self, orch: OrchestratorClient, plan: Plan) -> Tally:
        planned = {}
        created = 0
        for start in range(0, len(plan.items), BATCH):
            chunk = plan.items[start : start + BATCH]
            last = start + BATCH >= len(plan.items)
            # Every tracking joins one group, sealed with the last batch.
            answers = await orch.track_batch([p.intake for p in chunk], group=GROUP, seal=last)
            for item, answer in zip(chunk, answers, strict=True):
                if answer.tracking is None:
                    raise RuntimeError(f"intake refused {item.scenario}: {answer.problem}")
                planned[answer.tracking.tracking_id] = item
                created += answer.created
        self.say(
            f"submitted {len(planned)} through POST /v1/trackings/batch ({created} new) in "
            f"group {GROUP}, sealed with the last batch; waiting for every outcome"
        )
        return Tally(planned)

    async def _cancel(self, orch: OrchestratorClient, tally: Tally) -> None:
        """Cancel the jobs planned for it, as a caller would, while Moltaro allows it."""
        await asyncio.sleep(CANCEL_AFTER_S)
        for tracking_id in [tid for tid, p in tally.planned.items() if p.cancel]:
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
        # Redrawn in place when live, else a plain line now and then.
        live = Live(console=self.console, auto_refresh=False) if self.live else None
        with contextlib.nullcontext() if live is None else live:
            while time.monotonic() - started < RUN_LIMIT_S:
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
                    tally.group = await orch.group(GROUP)
                    last_metrics = now
                finished = (
                    len(tally.ended) >= tally.total
                    and tally.group_event is not None
                    and sink.stats.delivered >= tally.total + 1  # the group's event too
                )
                elapsed = time.monotonic() - started
                if live is not None:
                    live.update(display.renderable(tally, sink.stats, elapsed), refresh=True)
                else:
                    display.plain(tally, sink.stats, elapsed, force=finished)
                if finished:
                    return True
                await asyncio.sleep(TICK_S)
        return False


class ServeProcess:
    """``orchestrator serve`` with a generated config, a fresh SQLite file and its own token."""

    def __init__(self, workdir: Path, sim_url: str, sink_url: str, secret: str, token: str) -> None:
        with socket.socket() as s:  # a free port
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = workdir / "orchestrator.toml"
        self.log = workdir / "serve.log"
        self.config.write_text(
            _CONFIG.format(
                port=self.port, db=workdir / "demo.db", sim_url=sim_url, sink_url=sink_url
            )
        )
        self.secret = secret
        self.token = token
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, client: OrchestratorClient, timeout_s: float = 30.0) -> None:
        # The caller's own ORCH_* settings or WORKSPACE_API_BASE_URL must not
        # point the demo's service elsewhere.
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("ORCH_") and k != "WORKSPACE_API_BASE_URL"
        }
        env.update(ORCH_API_TOKENS=self.token, ORCH_SINK_SECRET=self.secret)
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "orchestrator",
                "serve",
                "--config",
                str(self.config),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
                # Its own process group: the terminal's Ctrl-C reaches the demo
                # only, which then stops the service in order.
                start_new_session=True,
            )
        async with asyncio.timeout(timeout_s):
            while not await client.ready():
                if self.proc.returncode is not None:
                    raise RuntimeError(f"orchestrator serve exited at start-up:\n{self.log_tail()}")
                await asyncio.sleep(0.05)

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    async def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM (a graceful drain), then SIGKILL if it lingers; the exit code."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return None if proc is None else proc.returncode
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            return await proc.wait()

    def kill_now(self) -> None:
        """Last resort when the loop is gone (the demo itself is being torn down)."""
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)


def run_demo(count: int = 300, seed: int | None = None, live: bool = True) -> int:
    # soft_wrap: a long line is never cut into two mid-phrase; a narrow terminal
    # folds it where it must.
    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        # Piped or captured: tables as wide as they need, not 80 columns.
        console = Console(highlight=False, width=120, soft_wrap=True)
    live = live and console.is_terminal
    demo = Demo(console, count, seed, live)

    terminated: list[bool] = []

    async def main() -> int:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()

        def on_sigterm() -> None:
            # Cancel like Ctrl-C does, so that the same clean-up runs.
            terminated.append(True)
            if task is not None:
                task.cancel()

        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
        try:
            return await demo.run()
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    try:
        return run_async(main)
    except (KeyboardInterrupt, asyncio.CancelledError):
        console.print("demo interrupted: every process it started has been stopped")
        return 143 if terminated else 130
    except Exception as exc:
        console.print(f"[red]demo failed: {exc}[/]")
        return 1
    finally:
        # If the loop died before its own clean-up ran, do not leave the service behind.
        if demo.serve is not None:
            demo.serve.kill_now()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
