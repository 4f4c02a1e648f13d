"""What a replica reports about its leases, on virtual time (issue #53).

A renewal's missed leases are counted by reason and logged at the level each
deserves: a tracking that ended is churn (no warning), work still held that went
elsewhere is trouble. The leases gauge follows the book at every moment, not
only at the loop's next tick, and also once the loop has stopped.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from orchestrator.engine.replica import Replica
from orchestrator.events.bus import EventBus
from orchestrator.metrics import Metrics
from orchestrator.store.base import Renewal
from orchestrator.store.memory import MemoryStore
from orchestrator.vocabulary import LeaseLoss
from tests.engine.harness import Rig, body, rig, run

LEASE_S = 30.0
QUEUED = {"JobId": "J-1", "Status": "Queued", "CanCancel": True}


class Losing(MemoryStore):
    """Shares work; its first renewal answers with the losses it is given."""

    shares_work = True

    def __init__(self, inner: MemoryStore, lost: dict[str, LeaseLoss]) -> None:
        self.__dict__.update(inner.__dict__)
        self.lost = lost

    async def renew_leases(self, held: int) -> Renewal:
        lost, self.lost = self.lost, {}
        return Renewal(lost, {"r1": asyncio.get_running_loop().time()})


def _replica(r: Rig, store: MemoryStore, metrics: Metrics) -> Replica:
    return Replica(
        replica_id="r1", store=store, engine=r.engine, settings=r.settings,
        metrics=metrics, bus=EventBus(), monotonic=r.clock.monotonic,
    )  # fmt: skip


def _leases(metrics: Metrics) -> float:
    return float(metrics.registry.get_sample_value(
        "orchestrator_replica_leases", {"workspace": "default"}
    ) or 0.0)  # fmt: skip


def _lost(metrics: Metrics, reason: LeaseLoss) -> float:
    value = metrics.registry.get_sample_value("orchestrator_leases_lost_total", {"reason": reason})
    return float(value or 0.0)


def test_churn_is_counted_without_a_warning_and_trouble_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="orchestrator.replica")

    async def main() -> None:
        r = await rig(store={"lease_timeout_s": LEASE_S})
        r.transport.script("/api/workspace/functions/jobs/J-1", body(200, QUEUED))
        held = await r.track("function_job", "J-1")
        lost = {
            "trk_done_1": LeaseLoss.FINISHED,
            "trk_done_2": LeaseLoss.FINISHED,
            "trk_gone": LeaseLoss.ENDED_ELSEWHERE,
            held.tracking_id: LeaseLoss.TAKEN,
        }
        metrics = Metrics()
        replica = _replica(r, Losing(r.store, lost), metrics)
        stop = asyncio.Event()
        task = asyncio.create_task(replica.run(stop))
        await asyncio.sleep(1)
        assert held.tracking_id not in r.engine.entries  # taken: dropped, never written
        assert _lost(metrics, LeaseLoss.FINISHED) == 2
        assert _lost(metrics, LeaseLoss.ENDED_ELSEWHERE) == 1
        assert _lost(metrics, LeaseLoss.TAKEN) == 1
        assert _lost(metrics, LeaseLoss.EXPIRED) == 0
        stop.set()
        await task
        await r.close()

    run(main)
    logged = {
        (rec.levelno, rec.fields["reason"], rec.fields["count"])  # type: ignore[attr-defined]
        for rec in caplog.records
        if rec.name == "orchestrator.replica" and "reason" in getattr(rec, "fields", {})
    }
    assert logged == {
        (logging.DEBUG, "finished", 2),
        (logging.INFO, "ended_elsewhere", 1),
        (logging.WARNING, "taken", 1),
    }


def test_the_leases_gauge_follows_the_book_between_ticks_and_after_the_loop() -> None:
    async def main() -> None:
        r = await rig(store={"lease_timeout_s": LEASE_S})
        for rid in ("J-1", "J-2"):
            r.transport.script(f"/api/workspace/functions/jobs/{rid}", body(200, QUEUED))
        first = await r.track("function_job", "J-1")
        second = await r.track("function_job", "J-2")
        metrics = Metrics()
        replica = _replica(r, Losing(r.store, {}), metrics)
        stop = asyncio.Event()
        task = asyncio.create_task(replica.run(stop))
        await asyncio.sleep(1.5)
        assert _leases(metrics) == 2
        await r.engine.abandon(first.tracking_id)  # between two of the loop's ticks
        assert _leases(metrics) == 1
        stop.set()
        await task
        await r.engine.abandon(second.tracking_id)  # the loop has stopped
        assert _leases(metrics) == 0
        await r.close()

    run(main)
