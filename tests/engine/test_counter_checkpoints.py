"""Poll counters reach the store a checkpoint after the reads, so a stop writes only
what was read since the last checkpoint, however many trackings are held."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence

from orchestrator.engine.counters import CHECKPOINT_S
from orchestrator.store.base import PollUpdate
from orchestrator.store.memory import MemoryStore
from tests.engine.harness import body, rig, run

JOBS = "/api/workspace/functions/jobs/"
HELD = 2_000


class CountingStore(MemoryStore):
    """Counts the poll results written."""

    def __init__(self) -> None:
        super().__init__()
        self.written = 0

    async def record_polls(self, updates: Sequence[PollUpdate]) -> None:
        self.written += len(updates)
        await super().record_polls(updates)


def _running(job_id: str) -> dict[str, object]:
    return {"JobId": job_id, "Status": "Leased", "CanCancel": True}


async def _stored_polls(store: MemoryStore, ids: Sequence[str]) -> list[int]:
    out = []
    for tracking_id in ids:
        t = await store.get_tracking(tracking_id)
        assert t is not None
        out.append(t.polls)
    return out


def test_a_stop_writes_only_the_counters_read_since_the_last_checkpoint() -> None:
    async def main() -> None:
        store = CountingStore()
        # Every job reads the same body each time: no read changes anything, so
        # no read is written as it is made.
        r = await rig(rate=10_000, max_in_flight=64, backend=store, max_delay_s=3600.0)
        ids = []
        for i in range(HELD):
            r.transport.script(JOBS + f"J-{i}", body(200, _running(f"J-{i}")))
            ids.append((await r.track("function_job", f"J-{i}")).tracking_id)
        # Every job read a few times (1, 2, 4, 8 s... apart, each +-20%): the seventh
        # read by 152 s, the eighth not before 204 s, a quiet stretch longer than a
        # checkpoint interval and a stop.
        await asyncio.sleep(155)
        held = {t: e.state.polls for t, e in r.engine.entries.items()}
        assert len(held) == HELD and min(held.values()) >= 3
        # A checkpoint later the store has every entry's counters, unasked.
        await asyncio.sleep(CHECKPOINT_S + 1)
        assert await _stored_polls(store, ids) == [held[t] for t in ids]

        # One job read again just before the stop: only its counters are left to write.
        r.engine.nudge(ids[0])
        await asyncio.sleep(1)
        assert r.engine.entries[ids[0]].state.polls == held[ids[0]] + 1
        before = store.written
        await r.close()
        assert store.written - before == 1
        assert (await _stored_polls(store, ids[:1])) == [held[ids[0]] + 1]

    run(main)


def test_a_tracking_written_by_its_reads_is_not_written_again_by_a_checkpoint() -> None:
    async def main() -> None:
        store = CountingStore()
        r = await rig(backend=store, max_delay_s=2.0)
        statuses = itertools.cycle(["Queued", "Leased"])  # every read a change
        r.transport.script(
            JOBS + "J-1", lambda _: body(200, _running("J-1") | {"Status": next(statuses)})
        )
        t = await r.track("function_job", "J-1")
        await asyncio.sleep(3 * CHECKPOINT_S)
        polls = r.engine.entries[t.tracking_id].state.polls
        assert polls >= 5
        await r.close()
        # One write per read, made with the read; none by the checkpoints or the stop.
        assert store.written == polls

    run(main)
