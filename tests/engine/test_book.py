"""The book of entries, through the engine on virtual time: every way a tracking
leaves it (an outcome, a deadline, a not found, an abandon, a lost lease, a hand
back, every lease given up) leaves nothing behind: no later read, no write, the
``trackings_active`` and ``resume_pending`` gauges at what the book holds; a
terminal write that fails puts the tracking back, to end on a later read."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from orchestrator.errors import StoreUnavailable
from orchestrator.store.base import Finish
from orchestrator.store.memory import MemoryStore
from tests.engine.harness import Answer, Rig, body, rig, run
from tests.engine.test_engine import completed

JOBS = "/api/workspace/functions/jobs/"
HUNG = JOBS + "J-hung"
LATER = JOBS + "J-later"


def _job(job_id: str, status: str) -> dict[str, object]:
    return {"JobId": job_id, "Status": status, "CanCancel": status != "Completed"}


def _active(r: Rig) -> float:
    sample = r.engine.metrics.registry.get_sample_value
    labels = {"workspace": "default", "kind": "function_job"}
    return sample("orchestrator_trackings_active", labels) or 0.0


def _pending(r: Rig) -> float:
    sample = r.engine.metrics.registry.get_sample_value
    return sample("orchestrator_resume_pending", {"workspace": "default"}) or 0.0


async def _reads_over(r: Rig, seconds: float) -> int:
    """Job reads made over the next ``seconds`` (the enum refresher's are not)."""
    before = len(r.transport.log)
    await asyncio.sleep(seconds)
    return sum(1 for _, _, path in r.transport.log[before:] if path.startswith(JOBS))


def test_every_ending_leaves_the_book_once_and_nothing_reads_it_after() -> None:
    async def main() -> None:
        r = await rig()
        run_of_done = {**completed()["Run"], "JobId": "DONE"}
        done_body = {**_job("DONE", "Completed"), "CurrentAttempt": 1, "Run": run_of_done}
        r.transport.script(JOBS + "DONE", body(200, done_body))
        r.transport.script(JOBS + "SLOW", body(200, _job("SLOW", "Running")))
        r.transport.script(JOBS + "KEPT", body(200, _job("KEPT", "Running")))
        # GONE is never scripted: every read is a 404.
        done = await r.track("function_job", "DONE")
        expired = await r.track("function_job", "SLOW", deadline_s=60)
        kept = await r.track("function_job", "KEPT")
        gone = await r.track("function_job", "GONE")
        assert _active(r) == 4
        await asyncio.sleep(5)
        abandoned = await r.engine.abandon(kept.tracking_id)
        assert abandoned is not None and abandoned.outcome == "abandoned"
        outcomes = {
            t.remote_id: (await r.final(t.tracking_id)).outcome for t in (done, expired, kept, gone)
        }
        assert outcomes["SLOW"] == "deadline_exceeded"
        assert outcomes["GONE"] == "not_found"
        assert outcomes["KEPT"] == "abandoned"
        assert outcomes["DONE"] == "succeeded"
        assert dict(r.engine.entries) == {}
        assert _active(r) == 0
        assert await _reads_over(r, 600) == 0  # nothing of them is read again
        terminals = [e for e in await r.events() if e["type"].rsplit(".", 1)[-1] != "status"]
        assert sorted(e["subject"] for e in terminals) == sorted(
            t.tracking_id for t in (done, expired, kept, gone)
        )
        await r.close()

    run(main)


def test_a_tracking_dropped_mid_read_is_neither_judged_nor_written() -> None:
    async def main() -> None:
        r = await rig()
        r.transport.latency_s = 5.0
        r.transport.script(JOBS + "J-1", body(200, _job("J-1", "Completed")))
        t = await r.track("function_job", "J-1")
        await asyncio.sleep(2.5)  # its first read is in flight
        assert r.transport.count(JOBS + "J-1") == 1
        assert r.engine.book.drop(t.tracking_id) is not None  # another replica's now
        assert _active(r) == 0
        await asyncio.sleep(120)
        assert r.transport.count(JOBS + "J-1") == 1  # the answer was dropped, no second read
        stored = await r.store.get_tracking(t.tracking_id)
        assert stored is not None and stored.state == "active" and stored.polls == 0
        assert await r.events() == []
        await r.close()

    run(main)


def test_hand_back_gives_up_the_waiting_entries_due_last_and_none_mid_read() -> None:
    async def main() -> None:
        r = await rig()
        for i in range(4):
            r.transport.script(JOBS + f"J-{i}", body(200, _job(f"J-{i}", "Running")))
        made = [await r.track("function_job", f"J-{i}") for i in range(4)]
        await asyncio.sleep(1.25)  # each read once (0.8-1.2 s); the next, 0.8-1.2 s on
        assert all(r.transport.count(JOBS + t.remote_id) == 1 for t in made)
        r.transport.latency_s = 100.0
        r.engine.nudge(made[0].tracking_id)  # read 0.2 s on
        await asyncio.sleep(0.3)
        assert r.transport.count(JOBS + "J-0") == 2  # mid-read
        waiting = sorted(made[1:], key=lambda t: r.engine.entries[t.tracking_id].due)
        handed = r.engine.book.hand_back(3)
        assert [e.tracking_id for e in handed] == [t.tracking_id for t in reversed(waiting)]
        assert list(r.engine.entries) == [made[0].tracking_id]
        assert _active(r) == 1
        await asyncio.sleep(300)
        assert [r.transport.count(JOBS + t.remote_id) for t in made[1:]] == [1, 1, 1]
        await r.close()

    run(main)


def test_dropping_every_entry_after_a_resume_leaves_no_read_pending() -> None:
    async def main() -> None:
        first = await rig()
        for i in range(6):
            first.transport.script(JOBS + f"J-{i}", body(200, _job(f"J-{i}", "Running")))
            await first.track("function_job", f"J-{i}")
        await first.close()  # a restart: six active trackings in the store

        r = await rig(backend=first.store, initial_delay_s=30.0)
        assert await r.engine.resume(r.store) == 6
        assert _pending(r) == 6 and _active(r) == 6
        dropped = r.engine.book.drop_all()  # every lease given up before any read
        assert len(dropped) == 6
        assert _pending(r) == 0 and _active(r) == 0
        assert await _reads_over(r, 600) == 0
        await r.close()

    run(main)


class FailsFirstFinish(MemoryStore):
    """A store whose first terminal write fails with nothing committed (disk full)."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = 0

    async def finish(self, items: Sequence[Finish]) -> list[bool]:
        if self.failed == 0:
            self.failed += 1
            raise StoreUnavailable("disk full")
        return await super().finish(items)


def test_a_terminal_write_that_fails_puts_the_tracking_back_to_end_later() -> None:
    async def main() -> None:
        store = FailsFirstFinish()
        r = await rig(backend=store)
        r.transport.script(JOBS + "J-1", body(200, _job("J-1", "Running")))
        t = await r.track("function_job", "J-1")
        await asyncio.sleep(5)
        assert await r.engine.abandon(t.tracking_id) is None  # not stored
        assert store.failed == 1
        assert t.tracking_id in r.engine.entries  # back in the book, read again
        assert _active(r) == 1
        await asyncio.sleep(5)
        assert r.transport.count(JOBS + "J-1") >= 2
        ended = await r.engine.abandon(t.tracking_id)
        assert ended is not None and ended.outcome == "abandoned"
        assert _active(r) == 0 and dict(r.engine.entries) == {}
        [event] = await r.events()
        assert event["type"].endswith(".abandoned")
        await r.close()

    run(main)


class FinishHangsThenFails(MemoryStore):
    """A store whose terminal writes hang until released, then fail (a link cut)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def finish(self, items: Sequence[Finish]) -> list[bool]:
        await self.release.wait()
        raise StoreUnavailable("link cut")


def test_a_failed_terminal_write_does_not_bring_back_work_whose_leases_went() -> None:
    """The leases given up (every entry dropped) while a terminal write was in flight:
    when that write fails, the tracking is a peer's to take, not this book's again."""

    async def main() -> None:
        store = FinishHangsThenFails()
        r = await rig(backend=store)
        r.transport.script(JOBS + "J-1", body(200, _job("J-1", "Running")))
        t = await r.track("function_job", "J-1")
        await asyncio.sleep(5)
        abandon = asyncio.create_task(r.engine.abandon(t.tracking_id))
        await asyncio.sleep(1)
        r.engine.book.drop_all()  # what a replica does when it gives its leases up
        store.release.set()
        assert await abandon is None
        assert dict(r.engine.entries) == {} and _active(r) == 0
        await r.close()

    run(main)


def test_a_read_that_hangs_does_not_hold_back_the_reads_due_after_it() -> None:
    """The worker that takes a read leaves the schedule to the others: the next
    entry, due later, is read when due, not once the hung read times out (10 s)."""

    async def main() -> None:
        r = await rig()
        queued = {"Status": "Queued", "CanCancel": True}
        r.transport.script(HUNG, body(200, {"JobId": "J-hung", **queued}))
        r.transport.script(LATER, body(200, {"JobId": "J-later", **queued}))
        send = r.transport.send

        async def hanging(
            method: str, url: str, headers: dict[str, str], data: bytes | None, timeout_s: float
        ) -> Answer:
            if url.endswith(HUNG):
                r.transport.log.append((asyncio.get_running_loop().time(), method, HUNG))
                await asyncio.sleep(3600)
            return await send(method, url, headers, data, timeout_s)

        r.transport.send = hanging  # type: ignore[method-assign]
        await r.track("function_job", "J-hung")  # first read due 0.8-1.2 s from now
        await asyncio.sleep(0.5)
        await r.track("function_job", "J-later")  # due 1.3-1.7 s from the start
        await asyncio.sleep(3)
        hung = [t for t, _, p in r.transport.log if p == HUNG]
        later = [t for t, _, p in r.transport.log if p == LATER]
        assert len(hung) == 1 and later, (hung, later)
        assert later[0] - hung[0] < 1.0, (hung, later)
        await r.close()

    run(main)
