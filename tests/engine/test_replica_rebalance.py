"""A replica above its fair share hands the excess back at its renewal, on virtual time.

Whatever it hands back it forgets at once (no read of it is in flight, none
starts later, no remote call), and releases with a hold so that the next
holder's first read comes no sooner than after a takeover.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Sequence

from orchestrator.engine.replica import VALID_FRACTION, Replica, excess
from orchestrator.events.bus import EventBus
from orchestrator.metrics import Metrics
from orchestrator.store.base import Renewal
from orchestrator.store.memory import MemoryStore
from tests.engine.harness import body, rig, run

LEASE_S = 30.0


def test_excess_is_zero_within_the_slack_and_down_to_the_share_beyond() -> None:
    assert excess(active=600, peers=3, held=243) == 0  # share 200, slack 3 x sqrt(200)
    assert excess(active=600, peers=3, held=244) == 44
    assert excess(active=600, peers=3, held=300) == 100
    assert excess(active=60_000, peers=3, held=22_000) == 0  # share 20,000: a tenth
    assert excess(active=60_000, peers=3, held=22_001) == 2001
    assert excess(active=3, peers=3, held=3) == 0  # share 1, slack at least 2


def test_steady_even_intake_hands_nothing_back() -> None:
    """Two replicas taking turns at intake hold about the same, each count swinging by
    about its square root as trackings end at random: those swings move nothing."""
    rng = random.Random(53)
    handed = 0
    for _ in range(10_000):
        a, b = _poisson(rng, 30.0), _poisson(rng, 30.0)  # ~60 active, as the soak's
        handed += excess(a + b, 2, a) > 0
    assert handed <= 2  # 4 standard deviations of the difference: about 1 in 30,000


def _poisson(rng: random.Random, mean: float) -> int:
    """A Poisson draw (Knuth's): the count of trackings held at a random moment."""
    limit, k, p = math.exp(-mean), 0, 1.0
    while (p := p * rng.random()) > limit:
        k += 1
    return k
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
