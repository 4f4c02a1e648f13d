"""A replica whose lease renewal stops answering: on virtual time, it says so
(``store_unavailable``, store_up 0) a third of the lease after sending it, and
gives its trackings up once the lease must have run out, rather than looking
healthy while it holds work it cannot renew."""

from __future__ import annotations

import asyncio

from orchestrator.engine.replica import Replica
from orchestrator.events.bus import EventBus
from orchestrator.metrics import Metrics
from orchestrator.store.memory import MemoryStore
from tests.engine.harness import body, rig, run

LEASE_S = 30.0
JOB = "/api/workspace/functions/jobs/J-1"


class HungRenewals(MemoryStore):
    """Shares work (a replica's store), answers heartbeats, and its first
    renewal; never one after."""

    shares_work = True

    def __init__(self, inner: MemoryStore) -> None:
        self.__dict__.update(inner.__dict__)
        self.renewals = 0

    async def renew_leases(self) -> list[str]:
        self.renewals += 1
        if self.renewals > 1:
            await asyncio.sleep(3600)
        return []

    async def heartbeat(self, leases: int) -> list[str]:
        return ["r1"]


def test_a_renewal_that_never_answers_is_store_trouble_then_the_leases_go() -> None:
    async def main() -> None:
        r = await rig(store={"lease_timeout_s": LEASE_S})
        r.transport.script(JOB, body(200, {"JobId": "J-1", "Status": "Queued", "CanCancel": True}))
        t = await r.track("function_job", "J-1")
        store = HungRenewals(r.store)
        metrics = Metrics()
        replica = Replica(
            replica_id="r1", store=store, engine=r.engine, settings=r.settings,
            metrics=metrics, bus=EventBus(), monotonic=r.clock.monotonic,
        )  # fmt: skip
        stop = asyncio.Event()
        task = asyncio.create_task(replica.run(stop))
        await asyncio.sleep(1)
        assert replica.state == "holding"
        # The second renewal is sent a third of the lease in and given up a third later.
        await asyncio.sleep(2 * LEASE_S / 3 + 1)
        assert store.renewals >= 2
        assert replica.state == "store_unavailable"
        assert metrics.store_up._value.get() == 0
        assert t.tracking_id in r.engine.entries  # within the lease: still held
        await asyncio.sleep(LEASE_S + 5)
        assert t.tracking_id not in r.engine.entries  # given up: another replica's now
        stop.set()
        await task
        await r.close()

    run(main)
