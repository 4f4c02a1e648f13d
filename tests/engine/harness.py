"""The engine on virtual time, against a fake transport: no sockets, no real sleeps.

``run(main)`` runs a coroutine on an event loop whose clock only moves when
nothing is ready to run: the selector, asked to wait, advances the clock by the
wait instead. A test that sleeps 600 s takes milliseconds, and the order of
timers is exactly what the engine asked for.
"""

from __future__ import annotations

import asyncio
import random
import selectors
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import orjson

from orchestrator.config import Settings, load_settings
from orchestrator.engine.engine import Engine
from orchestrator.events.bus import EventBus
from orchestrator.events.cloudevents import EventFactory
from orchestrator.metrics import Metrics
from orchestrator.store.base import NewTracking, Tracking
from orchestrator.store.memory import MemoryStore
from orchestrator.transport import Answer
from orchestrator.workspace.client import WorkspaceClient
from orchestrator.workspace.gate import WorkspaceGate

BASE = "http://workspace.test"
EPOCH = 1_800_000_000.0  # wall time at virtual monotonic 0


class _VirtualSelector(selectors.DefaultSelector):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[Any]:
        ready = super().select(0)
        if not ready and timeout is not None and timeout > 0:
            self.now += timeout
        elif not ready and timeout is None:
            raise RuntimeError("virtual loop: nothing scheduled and nothing to wait for")
        return ready


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._virtual = _VirtualSelector()
        super().__init__(self._virtual)

    def time(self) -> float:
        return self._virtual.now


def run(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    loop = VirtualTimeLoop()
    try:
        loop.run_until_complete(main())
    finally:
        # A failed test leaves the engine's tasks behind: end them before the loop.
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()

        async def drain() -> None:
            await asyncio.gather(*left, return_exceptions=True)

        loop.run_until_complete(drain())
        loop.close()


class VirtualClock:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def now(self) -> float:
        return EPOCH + self._loop.time()

    def monotonic(self) -> float:
        return self._loop.time()


Reply = Answer | BaseException | Callable[[float], "Answer | BaseException"]


def body(status: int, payload: Any, retry_after: str | None = None) -> Answer:
    return Answer(status, orjson.dumps(payload), retry_after)


@dataclass
class FakeTransport:
    """Answers per path, in order (the last one repeats); every request is logged."""

    loop: asyncio.AbstractEventLoop
    latency_s: float = 0.01
    replies: dict[str, list[Reply]] = field(default_factory=dict)
    log: list[tuple[float, str, str]] = field(default_factory=list)

    def script(self, path: str, *replies: Reply) -> None:
        self.replies[path] = list(replies)

    def count(self, path: str, method: str | None = None) -> int:
        return sum(1 for _, m, p in self.log if p == path and method in (None, m))

    async def send(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, timeout_s: float
    ) -> Answer:
        path = url.removeprefix(BASE).split("?", 1)[0]
        self.log.append((self.loop.time(), method, path))
        await asyncio.sleep(self.latency_s)
        queue = self.replies.get(path)
        if not queue:
            return Answer(404, b'{"title": "Not Found"}')
        reply = queue.pop(0) if len(queue) > 1 else queue[0]
        if callable(reply) and not isinstance(reply, BaseException):
            reply = reply(self.loop.time())
        if isinstance(reply, BaseException):
            raise reply
        return reply

    async def close(self) -> None:
        pass


POLLING = {
    "initial_delay_s": 1.0,
    "max_delay_s": 30.0,
    "multiplier": 2.0,
    "jitter": 0.2,
    "default_deadline_s": 3600,
    "max_deadline_s": 604800,
    "not_found_confirmations": 3,
    "not_found_min_s": 10,
    "run_history": True,
}


@dataclass
class Rig:
    engine: Engine
    store: MemoryStore
    transport: FakeTransport
    clock: VirtualClock
    settings: Settings
    task: asyncio.Task[None]
    made: int = 0

    async def track(
        self,
        kind: str,
        remote_id: str,
        deadline_s: float = 3600,
        deadline_source: str | None = "caller",
    ) -> Tracking:
        """``deadline_source="default"``: as intake without the caller's deadline."""
        self.made += 1
        now = self.clock.now()
        item = NewTracking(
            tracking_id=f"trk_{self.made:024x}",
            workspace="default",
            kind=kind,
            remote_id=remote_id,
            deadline_at=now + deadline_s,
            created_at=now,
            next_poll_at=now + 1.0,
            deadline_source=deadline_source,
        )
        [(tracking, _)] = await self.store.create_trackings([item])
        self.engine.add(tracking)
        return tracking

    async def final(self, tracking_id: str, within_s: float = 7200) -> Tracking:
        """The tracking once terminal, waiting up to ``within_s`` virtual seconds."""
        async with asyncio.timeout(within_s):
            while True:
                t = await self.store.get_tracking(tracking_id)
                assert t is not None
                if t.state == "terminal":
                    return t
                await asyncio.sleep(0.5)

    async def events(self) -> list[dict[str, Any]]:
        return [orjson.loads(e.payload) for e in await self.store.events_after(0, 10_000)]

    async def close(self) -> None:
        await self.engine.stop(1.0)
        await self.task


async def rig(
    rate: float = 500,
    max_in_flight: int = 8,
    store: dict[str, Any] | None = None,
    backend: MemoryStore | None = None,
    **polling: Any,
) -> Rig:
    """An engine on virtual time; ``backend``: the store of an earlier rig (a restart)."""
    loop = asyncio.get_running_loop()
    clock = VirtualClock(loop)
    settings = load_settings(
        None,
        polling={**POLLING, **polling},
        workspaces=[
            {
                "name": "default",
                "base_url": BASE,
                "max_requests_per_second": rate,
                "max_in_flight": max_in_flight,
            }
        ],
        events={"sinks": []},
        **({"store": store} if store else {}),
    )
    transport = FakeTransport(loop)
    cfg = settings.workspaces[0]
    gate = WorkspaceGate(rate, max_in_flight, clock.monotonic)
    client = WorkspaceClient(cfg, transport, None, gate, clock)
    store = backend or MemoryStore()
    engine = Engine(
        settings,
        store,
        clock,
        Metrics(),
        EventBus(),
        EventFactory(settings.events),
        {"default": client},
        rng=random.Random(7),
    )
    task = asyncio.create_task(engine.run())
    return Rig(engine, store, transport, clock, settings, task)
