"""A restart's first reads on virtual time: new work is not starved by the resumed
backlog, and the backlog is not starved by the reads that follow it."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.engine.harness import Rig, body, rig, run

RESUMED = 400


def job_path(i: int) -> str:
    return f"/api/workspace/functions/jobs/J-{i}"


def queued(i: int) -> dict[str, str]:
    return {"JobId": f"J-{i}", "Status": "Queued"}


async def resumed_rig(**polling: Any) -> Rig:
    """400 trackings read once (Queued, stored), then resumed by a service limited to
    100 reads/s but able to make only 40 (two slots, 50 ms a read)."""
    first = await rig(rate=1000, max_in_flight=8)
    for i in range(RESUMED):
        first.transport.script(job_path(i), body(200, queued(i)))
        await first.track("function_job", f"J-{i}")
    while len({p for _, _, p in first.transport.log}) < RESUMED:
        await asyncio.sleep(0.5)
    await first.close()
    r = await rig(rate=100, max_in_flight=2, backend=first.store, **polling)
    r.made = first.made
    r.transport.latency_s = 0.05
    for i in range(RESUMED + 1):
        r.transport.script(job_path(i), body(200, queued(i)))
    assert await r.engine.resume(r.store) == RESUMED
    return r


def test_a_tracking_added_while_a_slow_resume_catches_up_is_read_on_time() -> None:
    """400 trackings resumed under a limit of 100 reads/s are planned over 4 s, but
    two slots at 50 ms a read make 40 reads/s: the resume needs 10 s. A tracking
    handed over 3 s in is first read after its initial delay, not after the backlog."""

    async def main() -> None:
        r = await resumed_rig(initial_delay_s=1.0)
        await asyncio.sleep(3.0)
        added_at = r.clock.monotonic()
        await r.track("function_job", f"J-{RESUMED}")
        while r.transport.count(job_path(RESUMED)) == 0:
            await asyncio.sleep(0.01)
        first_read = r.transport.log[-1][0]
        # Its initial delay (at most 1.2 s with the jitter), and a read's time.
        assert first_read - added_at <= 1.2 + 0.1
        # The backlog was still being read then; then every resumed tracking is read.
        assert len({p for _, _, p in r.transport.log}) < RESUMED
        while r.engine.book.pending.left:
            await asyncio.sleep(0.1)
        await r.close()

    run(main)


def test_every_resumed_tracking_is_read_while_later_reads_are_always_due() -> None:
    """Overloaded: once read, every tracking is due again 20 ms later. The reads that
    fell due first are taken first, so the resume still ends (in about the 10 s two
    slots need for 400 reads), and is never left behind by the re-reads."""

    async def main() -> None:
        r = await resumed_rig(initial_delay_s=0.02, max_delay_s=0.02, multiplier=1.0)
        started = r.clock.monotonic()
        async with asyncio.timeout(20):
            while r.engine.book.pending.left:
                await asyncio.sleep(0.1)
        assert r.clock.monotonic() - started >= RESUMED / 40
        await r.close()

    run(main)
