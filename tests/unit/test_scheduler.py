"""The per-workspace scheduler with a hand-driven monotonic clock."""

from __future__ import annotations

import asyncio

from orchestrator.engine.book import WorkspaceScheduler
from orchestrator.store.base import Tracking
from orchestrator.workspace.gate import TokenBucket, WorkspaceGate


def _tracking(i: int) -> Tracking:
    return Tracking(
        tracking_id=f"trk_{i:024x}",
        workspace="w",
        kind="function_job",
        remote_id=f"j-{i}",
        state="active",
        outcome=None,
        remote_status=None,
        remote=None,
        result=None,
        polls=0,
        last_polled_at=None,
        next_poll_at=None,
        last_error=None,
        deadline_at=1e12,
        created_at=0.0,
        terminal_at=None,
        labels={},
        correlation_id=None,
        callback_url=None,
        notify="terminal",
    )


def test_token_bucket_limits_rate() -> None:
    bucket = TokenBucket(rate=10, burst=1, now=0.0)
    assert bucket.take(0.0) == 0.0
    wait = bucket.take(0.0)
    assert 0.09 < wait <= 0.1
    assert bucket.take(0.1) == 0.0


async def test_dispatch_order_rate_limit_and_bad_poll_isolation() -> None:
    from orchestrator.engine.entry import Entry

    loop = asyncio.get_running_loop()
    polled: list[str] = []

    async def poll(entry: Entry, gen: int) -> None:
        polled.append(entry.remote_id)
        if entry.remote_id == "j-2":
            raise RuntimeError("a bug in one poll")

    async def expire(entry: Entry) -> None:
        raise AssertionError("no deadline here")

    gate = WorkspaceGate(1000, 2, loop.time)
    sched = WorkspaceScheduler("w", gate, monotonic=loop.time, poll=poll, expire=expire)
    entries = [Entry(_tracking(i), deadline_mono=loop.time() + 1e6) for i in range(5)]
    now = loop.time()
    # Scheduled out of order; dispatched by due time.
    for i, delay in enumerate([0.05, 0.01, 0.03, 0.02, 0.04]):
        sched.schedule(entries[i], now + delay)
    # A rescheduled entry is read once, at its new time.
    sched.schedule(entries[0], now + 0.06)
    tasks = [asyncio.create_task(sched.worker()) for _ in range(2)]
    async with asyncio.timeout(5):
        while len(polled) < 5:
            await asyncio.sleep(0.01)
    assert polled == ["j-1", "j-3", "j-2", "j-4", "j-0"]
    # The failing entry was put back (30 s later), the workers kept going.
    assert len(sched) == 1
    sched.stop()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)


async def test_blocked_workspace_dispatches_nothing_until_retry_after() -> None:
    from orchestrator.engine.entry import Entry

    loop = asyncio.get_running_loop()
    times: list[float] = []

    async def poll(entry: Entry, gen: int) -> None:
        times.append(loop.time())

    async def expire(entry: Entry) -> None:
        times.append(-1.0)

    gate = WorkspaceGate(1000, 1, loop.time)
    sched = WorkspaceScheduler("w", gate, monotonic=loop.time, poll=poll, expire=expire)
    start = loop.time()
    gate.block(0.3)
    live = Entry(_tracking(1), deadline_mono=start + 10)
    dying = Entry(_tracking(2), deadline_mono=start + 0.1)
    sched.schedule(live, start)
    sched.schedule(dying, start + 0.05)
    tasks = [asyncio.create_task(sched.worker())]
    async with asyncio.timeout(5):
        while len(times) < 2:
            await asyncio.sleep(0.01)
    # The tracking whose deadline fell inside the block ends without a read;
    # the other is read only once the block is over.
    assert -1.0 in times
    assert next(t for t in times if t >= 0) - start >= 0.29
    sched.stop()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)


async def test_read_handed_over_before_a_retry_after_waits_for_it() -> None:
    from orchestrator.engine.entry import Entry

    loop = asyncio.get_running_loop()
    times: dict[str, float] = {}
    sched: WorkspaceScheduler

    async def poll(entry: Entry, gen: int) -> None:
        times[entry.remote_id] = loop.time()
        if entry.remote_id == "j-1":
            # The answer to the first read carries Retry-After: 0.3 s.
            await asyncio.sleep(0.05)
            gate.block(0.3)

    async def expire(entry: Entry) -> None:
        raise AssertionError("no deadline here")

    gate = WorkspaceGate(1000, 1, loop.time)
    sched = WorkspaceScheduler("w", gate, monotonic=loop.time, poll=poll, expire=expire)
    start = loop.time()
    first = Entry(_tracking(1), deadline_mono=start + 10)
    second = Entry(_tracking(2), deadline_mono=start + 10)
    sched.schedule(first, start)
    sched.schedule(second, start + 0.001)
    tasks = [asyncio.create_task(sched.worker())]
    async with asyncio.timeout(5):
        while len(times) < 2:
            await asyncio.sleep(0.01)
    assert times["j-2"] - start >= 0.34
    sched.stop()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)


async def test_a_workspace_that_answers_nothing_gets_one_read_at_a_time() -> None:
    """Reads that time out or cannot connect leave one read in flight at a time until
    the workspace answers again: reads piled up on a cut link would all reach it when
    the link heals."""
    loop = asyncio.get_running_loop()
    gate = WorkspaceGate(1000, 4, loop.time)
    first, second, third = object(), object(), object()
    assert gate.enter_nowait(first) and gate.enter_nowait(second)
    gate.unanswered()
    gate.leave(first)
    assert not gate.enter_nowait(third)  # the second is still in flight
    gate.leave(second)
    assert gate.enter_nowait(third)
    assert not gate.enter_nowait(object())
    gate.set_share(2)  # a peer joined: still one at a time
    assert not gate.enter_nowait(object())
    gate.answered()
    gate.leave(third)
    assert gate.enter_nowait(object()) and gate.enter_nowait(object())
    assert not gate.enter_nowait(object())  # the share of 4 between two replicas
