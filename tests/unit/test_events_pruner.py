import asyncio
from dataclasses import replace

from orchestrator.config import EventsConfig
from orchestrator.events.cloudevents import EventFactory
from orchestrator.events.pruner import PRUNE_BATCH, run_pruner
from orchestrator.store import Finish, MemoryStore, NewTracking

NOW = 1_800_000_000.0
DAY = 86400.0


class FixedClock:
    def now(self) -> float:
        return NOW

    def monotonic(self) -> float:
        return 0.0


class Recording(MemoryStore):
    """A MemoryStore that logs prune calls, to see what runs between them."""

    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    async def prune(self, before: float, batch: int) -> int:
        deleted = await super().prune(before, batch)
        self.log.append(f"prune:{batch}:{deleted}")
        return deleted


async def fill(store: MemoryStore, n: int, terminal_at: float) -> None:
    factory = EventFactory(EventsConfig())
    items = [
        NewTracking(
            tracking_id=f"trk_{terminal_at}_{i}",
            workspace="default",
            kind="function_job",
            remote_id=f"J-{terminal_at}-{i}",
            deadline_at=NOW,
            created_at=terminal_at - 10,
            next_poll_at=terminal_at,
        )
        for i in range(n)
    ]
    finishes = []
    for t, _ in await store.create_trackings(items):
        done = replace(t, state="terminal", outcome="succeeded", terminal_at=terminal_at)
        finishes.append(
            Finish(
                t.tracking_id, "succeeded", terminal_at, None, factory.terminal(done, terminal_at)
            )
        )
    await store.finish(finishes)


async def test_prunes_old_terminal_trackings_in_small_batches_yielding_between() -> None:
    log: list[str] = []
    store = Recording(log)
    await store.open()
    await fill(store, 1100, NOW - 8 * DAY)
    await fill(store, 10, NOW - 1 * DAY)
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            log.append("tick")
            await asyncio.sleep(0)

    cfg = EventsConfig(retention_s=7 * DAY, prune_interval_s=3600)
    async with asyncio.TaskGroup() as tg:
        tg.create_task(ticker())
        pruner = tg.create_task(run_pruner(store, cfg, FixedClock(), stop))
        for _ in range(10_000):
            if sum(1 for x in log if x.startswith("prune")) >= 3:
                break
            await asyncio.sleep(0)
        stop.set()
        await asyncio.wait_for(pruner, 5)  # the interval wait ends on stop

    prunes = [x for x in log if x.startswith("prune")]
    assert prunes == [f"prune:{PRUNE_BATCH}:500", f"prune:{PRUNE_BATCH}:500", "prune:500:100"]
    first, second = [i for i, x in enumerate(log) if x.startswith("prune")][:2]
    assert "tick" in log[first + 1 : second]  # polling-side tasks ran between batches
    assert len(await store.events_after(0, 5000)) == 10
    await store.close()
