"""A replica above its fair share hands the excess back at its renewal, on virtual time.

Whatever it hands back it forgets at once (no read of it is in flight, none
starts later, no remote call), and releases with a hold so that the next
holder's first read comes no sooner than after a takeover.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from orchestrator.engine.replica import VALID_FRACTION, Replica, excess
from orchestrator.events.bus import EventBus
from orchestrator.metrics import Metrics
from orchestrator.store.base import Renewal
from orchestrator.store.memory import MemoryStore
from tests.engine.harness import body, rig, run

LEASE_S = 30.0


def test_excess_is_zero_within_the_slack_and_down_to_the_share_beyond() -> None:
    assert excess(active=600, peers=3, held=220) == 0  # share 200, slack 20
    assert excess(active=600, peers=3, held=221) == 21
    assert excess(active=600, peers=3, held=300) == 100
    assert excess(active=3, peers=3, held=3) == 0  # share 1, slack at least 2
    assert excess(active=600, peers=1, held=600) == 0
    assert excess(active=0, peers=0, held=0) == 0


class ThreePeers(MemoryStore):
    """Shares work with two idle peers; records what is released."""

    shares_work = True

    def __init__(self, inner: MemoryStore) -> None:
        self.__dict__.update(inner.__dict__)
        self.released: list[tuple[list[str], float]] = []

    async def renew_leases(self, held: int) -> Renewal:
        now = asyncio.get_running_loop().time()  # every peer's heartbeat is fresh
        return Renewal({}, {"r1": now, "r2": now, "r3": now})

    async def release_leases(
        self, tracking_ids: Sequence[str] | None = None, *, hold_s: float = 0.0
    ) -> None:
        assert tracking_ids is not None
        self.released.append((list(tracking_ids), hold_s))


def test_a_replica_above_its_share_hands_the_excess_back_and_forgets_it() -> None:
    async def main() -> None:
        r = await rig(store={"lease_timeout_s": LEASE_S})
        ids = []
        for i in range(30):
            job = f"/api/workspace/functions/jobs/J-{i}"
            r.transport.script(job, body(200, {"JobId": f"J-{i}", "Status": "Leased"}))
            ids.append((await r.track("function_job", f"J-{i}")).tracking_id)
        await asyncio.sleep(5)  # every job read once or more
        store = ThreePeers(r.store)
        metrics = Metrics()
        replica = Replica(
            replica_id="r1", store=store, engine=r.engine, settings=r.settings,
            metrics=metrics, bus=EventBus(), monotonic=r.clock.monotonic,
        )  # fmt: skip
        stop = asyncio.Event()
        task = asyncio.create_task(replica.run(stop))
        await asyncio.sleep(2.5)  # joined once the peers' heartbeats saw it (1 s on)
        # 30 active among three live replicas: a share of 10; 20 handed back, once.
        [(released, hold)] = store.released
        assert len(released) == 20 and hold == LEASE_S * (1 - VALID_FRACTION)
        assert len(r.engine.entries) == 10
        assert not set(released) & set(r.engine.entries)
        assert metrics.lease_handovers_total._value.get() == 20
        reads = len(r.transport.log)
        released_paths = {f"/api/workspace/functions/jobs/J-{ids.index(t)}" for t in released}
        await asyncio.sleep(LEASE_S)  # renewals come and go: within the slack now
        assert len(store.released) == 1
        later = [path for _, _, path in r.transport.log[reads:]]
        assert later and not released_paths & set(later)  # never read again here
        assert not any(method != "GET" for _, method, _ in r.transport.log)  # no cancel
        stop.set()
        await task
        await r.close()

    run(main)
