"""A replica's renewals against a store that misbehaves, on virtual time.

A renewal that stops answering is store trouble a third of the lease after it
was sent, and the trackings go once the lease must have run out; after an
outage the workspace share grows only two leases after the store is back, while
the other replicas may still be reconnecting."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from orchestrator.engine.replica import Replica
from orchestrator.errors import StoreUnavailable
from orchestrator.events.bus import EventBus
from orchestrator.metrics import Metrics
from orchestrator.store.base import Claimed, Renewal
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

    async def renew_leases(self, held: int) -> Renewal:
        self.renewals += 1
        if self.renewals > 1:
            await asyncio.sleep(3600)
        return Renewal({}, {"r1": asyncio.get_running_loop().time()})


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


class Outage(MemoryStore):
    """Three live replicas; then the store is unreachable for longer than a lease;
    then it answers again, first with this replica alone in the heartbeat table."""

    shares_work = True

    def __init__(self, inner: MemoryStore, clock: Callable[[], float]) -> None:
        self.__dict__.update(inner.__dict__)
        self.clock = clock

    async def renew_leases(self, held: int) -> Renewal:
        now = self.clock()
        if 20.0 <= now < 60.0:
            raise StoreUnavailable("the database restarts")
        return Renewal({}, {"r1": now, "r2": now, "r3": now} if now < 20.0 else {"r1": now})


def test_after_an_outage_the_share_grows_only_two_leases_after_the_store_is_back() -> None:
    async def main() -> None:
        r = await rig(store={"lease_timeout_s": LEASE_S})
        store = Outage(r.store, r.clock.monotonic)
        replica = Replica(
            replica_id="r1", store=store, engine=r.engine, settings=r.settings,
            metrics=Metrics(), bus=EventBus(), monotonic=r.clock.monotonic,
        )  # fmt: skip
        gate = r.engine.clients["default"].gate
        stop = asyncio.Event()
        task = asyncio.create_task(replica.run(stop))
        await asyncio.sleep(15)
        assert gate.share == 3
        await asyncio.sleep(90)  # 105 s: back for 45 s, only r1 seen since
        assert replica.state == "holding"
        assert gate.share == 3  # the others may be reconnecting still
        await asyncio.sleep(30)  # 135 s: two leases and more since it came back
        assert gate.share == 1  # they are gone: the whole limit is r1's
        stop.set()
        await task
        await r.close()

    run(main)


class Peers(MemoryStore):
    """Two live peers that heartbeat every 10 s (r2 at 3, 13, ..., r3 at 7, 17, ...),
    as replicas renewing a third of a 30 s lease do; the store's clock is ours."""

    shares_work = True

    def __init__(self, inner: MemoryStore, clock: Callable[[], float]) -> None:
        self.__dict__.update(inner.__dict__)
        self.clock = clock

    async def renew_leases(self, held: int) -> Renewal:
        now = self.clock()

        def last(offset: float) -> float:
            return offset + 10 * ((now - offset) // 10)

        return Renewal({}, {"r1": now, "r2": last(3.0), "r3": last(7.0)})


def test_a_joining_replica_reads_only_once_every_peer_has_counted_it() -> None:
    """Until a peer's heartbeat has seen the newcomer, that peer still takes half of
    the workspace's limit: the newcomer's third on top would pass it."""

    async def main() -> None:
        r = await rig(store={"lease_timeout_s": LEASE_S})
        r.transport.script(JOB, body(200, {"JobId": "J-1", "Status": "Queued", "CanCancel": True}))
        await r.track("function_job", "J-1")  # its first read due at 0.8-1.2 s
        replica = Replica(
            replica_id="r1", store=Peers(r.store, r.clock.monotonic), engine=r.engine,
            settings=r.settings, metrics=Metrics(), bus=EventBus(), monotonic=r.clock.monotonic,
        )  # fmt: skip
        stop = asyncio.Event()
        task = asyncio.create_task(replica.run(stop))
        await asyncio.sleep(6.5)  # r2 has counted r1 (at 3 s), r3 not yet (at 7 s)
        assert replica.state == "joining"
        assert r.transport.count(JOB) == 0
        await asyncio.sleep(3)  # r3 at 7 s; r1's next heartbeat sees it
        assert replica.state == "holding"
        assert r.transport.count(JOB) >= 1
        stop.set()
        await task
        await r.close()

    run(main)


class SlowStore(MemoryStore):
    """Every lease and count call answers after ``slow_s`` (a distant database): a
    renewal, a rebalance's count and a claim together take longer than a lease's
    valid part."""

    shares_work = True

    def __init__(self, inner: MemoryStore, clock: Callable[[], float], slow_s: float) -> None:
        self.__dict__.update(inner.__dict__)
        self.clock = clock
        self.slow_s = slow_s
        self.claims = 0

    async def renew_leases(self, held: int) -> Renewal:
        await asyncio.sleep(self.slow_s)
        return Renewal({}, {"r1": self.clock()})

    async def active_counts(self) -> dict[str, int]:
        await asyncio.sleep(self.slow_s)
        return await super().active_counts()

    async def claim_trackings(self, limit: int) -> Claimed:
        self.claims += 1
        await asyncio.sleep(self.slow_s)
        return Claimed([], 0)


def test_on_a_slow_store_renewals_keep_the_leases_valid_however_slow_the_claims() -> None:
    """Renewal, rebalance count and claim at a fifth of a lease each: a loop that
    claimed before renewing again would let the leases stop reads every round."""

    async def main() -> None:
        r = await rig(store={"lease_timeout_s": LEASE_S})
        store = SlowStore(r.store, r.clock.monotonic, LEASE_S / 5)
        replica = Replica(
            replica_id="r1", store=store, engine=r.engine, settings=r.settings,
            metrics=Metrics(), bus=EventBus(), monotonic=r.clock.monotonic,
        )  # fmt: skip
        gate = r.engine.clients["default"].gate
        stop = asyncio.Event()
        task = asyncio.create_task(replica.run(stop))
        await asyncio.sleep(LEASE_S / 5 + 1)  # the first renewal has landed
        lapsed = []
        for second in range(int(10 * LEASE_S)):
            if gate.leases_valid_until <= r.clock.monotonic():
                lapsed.append(second)
            await asyncio.sleep(1)
        assert lapsed == []
        assert replica.state == "holding"
        stop.set()
        await task
        await r.close()

    run(main)
