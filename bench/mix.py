"""The scripted duration mix, its ideal read counts, and the sink that times events.

Every job of the mix is a ``POST /_sim/script`` timeline (Queued, Leased after
a pickup, terminal after a run), so the moment its terminal state is first
served is known exactly. Each job has a function of its own: the service reads
a finished job's runs by function (``polling.run_history``), and a shared
function would make every such read return all the others' runs as well.
A share of them retries once with ``NextRunAt``, to
check that no read falls inside a NextRunAt window.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from aiohttp import web

NEXT_RUN_WAIT_S = 2.0


@dataclass(slots=True)
class Planned:
    remote_id: str
    created: float  # unix time the simulator created it (midpoint of the request)
    changes: list[float]  # seconds after creation at which the status changes
    terminal_s: float  # seconds after creation of the terminal state
    retry_window: tuple[float, float] | None = None  # NextRunAt window, seconds after creation
    tracking_id: str = ""


def draw_timeline(
    rng: random.Random, scale: float
) -> tuple[list[dict[str, Any]], list[float], tuple[float, float] | None]:
    """One job: mostly short, some medium, a few long (``scale`` stretches the mix)."""
    r = rng.random()
    run = (
        rng.uniform(0.3, 2.0)
        if r < 0.5
        else rng.uniform(2.0, 5.0)
        if r < 0.85
        else rng.uniform(5.0, 9.0)
    )
    run *= scale
    pickup = rng.uniform(0.1, 1.0)
    steps: list[dict[str, Any]] = [
        {"after_s": 0.0, "status": "Queued"},
        {"after_s": pickup, "status": "Leased"},
    ]
    changes = [pickup]
    window = None
    at = pickup + run
    if rng.random() < 0.1:
        # First attempt fails and the job waits for NextRunAt before its second one.
        failed_at = pickup + run / 2
        steps.append(
            {
                "after_s": failed_at,
                "status": "Queued",
                "next_run_at_in_s": NEXT_RUN_WAIT_S,
                "fields": {"WillRetry": True},
            }
        )
        window = (failed_at, failed_at + NEXT_RUN_WAIT_S)
        steps.append({"after_s": failed_at + NEXT_RUN_WAIT_S + 0.2, "status": "Leased"})
        changes += [failed_at, failed_at + NEXT_RUN_WAIT_S + 0.2]
        at = failed_at + NEXT_RUN_WAIT_S + 0.2 + run / 2
    steps.append({"after_s": at, "status": "Completed", "run": {"Status": "Success"}})
    changes.append(at)
    return steps, changes, window


async def create_mix(
    session: aiohttp.ClientSession, sim: str, count: int, scale: float, seed: int
) -> list[Planned]:
    rng = random.Random(seed)
    out: list[Planned] = []
    for _ in range(count):
        steps, changes, window = draw_timeline(rng, scale)
        t0 = time.time()
        async with session.post(
            f"{sim}/_sim/script",
            json={"kind": "function_job", "steps": steps, "function_key": f"bench.mix-{len(out)}"},
        ) as resp:
            resp.raise_for_status()
            rid = (await resp.json())["id"]
        created = (t0 + time.time()) / 2
        out.append(Planned(rid, created, changes, changes[-1], window))
    return out


def ideal_reads(
    p: Planned, start: float, initial: float, multiplier: float, max_delay: float
) -> int:
    """Reads of a jitter-free poller with the same backoff rules (restart when the status changes).

    The poller reads at ``initial`` after intake, then backs off; a changed
    status restarts the backoff; a NextRunAt it sees pushes the next read to
    NextRunAt. It stops at the first read that sees the terminal state.
    ``start`` is when the tracking was accepted, in seconds after the job's
    creation; the first read always counts as a change (nothing seen yet).
    """
    t, delay, reads, seen = start + initial, initial, 0, -1
    while True:
        reads += 1
        phase = sum(1 for c in p.changes if c <= t)
        if t >= p.terminal_s:
            return reads
        if phase != seen:
            seen, delay = phase, initial
        else:
            delay = min(delay * multiplier, max_delay)
        nxt = t + delay
        if p.retry_window is not None and p.retry_window[0] <= t < p.retry_window[1]:
            nxt = max(nxt, p.retry_window[1])
        t = nxt


@dataclass
class Sink:
    """A webhook sink that records when each terminal event arrived."""

    received: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)
    duplicates: int = 0
    runner: web.AppRunner | None = None
    url: str = ""

    async def _post(self, request: web.Request) -> web.Response:
        at = time.time()
        event = orjson.loads(await request.read())
        if not str(event.get("type", "")).endswith("status_changed"):
            subject = event.get("subject", "")
            if subject in self.received:
                self.duplicates += 1
            else:
                self.received[subject] = (at, event.get("data") or {})
        return web.Response(status=204)

    async def start(self, port: int) -> None:
        app = web.Application()
        app.router.add_post("/events", self._post)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", port).start()
        self.url = f"http://127.0.0.1:{port}/events"

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
