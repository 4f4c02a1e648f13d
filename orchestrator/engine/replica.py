"""One replica among several on a shared store: its leases, its peers, its share.

A loop on the event loop itself (no heartbeat thread, so a stalled loop cannot
look healthy) renews this replica's leases and heartbeat every third of
``store.lease_timeout_s``, and claims trackings whose lease ran out, up to a
fair share, feeding them to the engine as a resume (first reads spread under
the rate limit). A lease that could not be renewed is dropped from the engine
without any remote call. When the loop's lag passes ``polling.stall_lag_s`` the
replica gives every lease up at once rather than keep work it cannot poll.
When the store cannot be reached, reads stop before the leases could have run
out, and the leases are forgotten once they must have; nothing acknowledged is
lost (it is all in the store) and work is claimed again once the store answers.

Work spreads to a replica that joins late: at each renewal, a replica holding
more than its fair share (plus a slack, so that small swings move nothing) hands
the excess back. It forgets those trackings (none is being read: only entries
waiting in the schedule are chosen), writes their counters, and releases their
leases to be claimed, after a gap, through the ordinary claim path.

Each workspace's limits are split evenly by the live replica count from the
heartbeat table (``WorkspaceGate.set_share``): no round trip to the database per
request, and a replica that loses the database keeps the share it had.

A single-process store holds everything for its one owner: the loop then has
nothing to do. The leases gauge reads the book when scraped, as trackings_active
does, so it never lags the trackings it counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
from collections import Counter, deque
from collections.abc import AsyncGenerator, Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from orchestrator.aio import bounded
from orchestrator.errors import StoreError, StoreUnavailable
from orchestrator.store.base import Claimed, Tracking, paged_active
from orchestrator.vocabulary import LeaseLoss

if TYPE_CHECKING:
    from orchestrator.config import Settings
    from orchestrator.engine.engine import Engine
    from orchestrator.events.bus import EventBus
    from orchestrator.looplag import LoopLagMonitor
    from orchestrator.metrics import Metrics
    from orchestrator.store.base import Store

log = logging.getLogger("orchestrator.replica")
T = TypeVar("T")

# Reads stop this far into a lease's life unless a renewal landed: a read still in
# flight then ends before the lease could pass to another replica.
VALID_FRACTION = 2 / 3
# A renewal (and its heartbeat), a claim or a count that has not answered in this
# fraction of the lease is store trouble: a hung call must not hold the loop (and
# so the gauges and the next renewal) or look like a healthy replica.
RENEW_BOUND_FRACTION = 1 / 3
CLAIM_EVERY_S = 1.0  # the polling fallback behind LISTEN/NOTIFY
# A peer's heartbeat this much later than a (re)joining replica's first one saw it
# (a statement sees what was committed before it started).
JOIN_MARGIN_S = 0.5
# A replica hands work back only when above its share by more than this (a tenth of
# the share, at least REBALANCE_SLACK_MIN): churn of a few trackings moves nothing.
REBALANCE_SLACK_FRACTION = 0.1
REBALANCE_SLACK_MIN = 2
# How a renewal's missed leases are logged: churn below WARNING, lost work at it.
LOSS_LOGS = {
    LeaseLoss.FINISHED: (logging.DEBUG, "renewal crossed trackings finishing here"),
    LeaseLoss.ENDED_ELSEWHERE: (logging.INFO, "trackings ended through another replica"),
    LeaseLoss.TAKEN: (logging.WARNING, "leases lost to other replicas"),
    LeaseLoss.EXPIRED: (logging.WARNING, "leases ran out before their renewal"),
}


def fair_claim(claim_batch: int, active: int, peers: int, held: int) -> int:
    """How many trackings to claim now: up to an even share of all active ones (less
    what this replica holds), never more than ``claim_batch`` in one statement."""
    share = math.ceil(active / max(1, peers))
    return max(0, min(claim_batch, share - held))


def excess(active: int, peers: int, held: int) -> int:
    """How many trackings to hand back: down to the even share, once more than the
    share and its slack are held (0 otherwise)."""
    share = math.ceil(active / max(1, peers))
    slack = max(REBALANCE_SLACK_MIN, math.ceil(share * REBALANCE_SLACK_FRACTION))
    return held - share if held > share + slack else 0


class ClaimedBatch:
    """Claimed trackings, read by ``Engine.resume`` as if they were a store's."""

    def __init__(self, trackings: Sequence[Tracking]) -> None:
        self._rows = sorted(trackings, key=lambda t: t.tracking_id)

    async def active_counts(self) -> dict[str, int]:
        return dict(Counter(t.workspace for t in self._rows))

    async def load_active(
        self, after: str | None = None, limit: int | None = None
    ) -> list[Tracking]:
        rows = [t for t in self._rows if after is None or t.tracking_id > after]
        return rows if limit is None else rows[:limit]

    def active_chunks(self, size: int) -> AsyncGenerator[list[Tracking], None]:
        return paged_active(self, size)


class Replica:
    def __init__(
        self,
        *,
        replica_id: str,
        store: Store,
        engine: Engine,
        settings: Settings,
        metrics: Metrics,
        bus: EventBus,
        lag: LoopLagMonitor | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.id = replica_id
        self.peers = [replica_id]
        self.state = "starting"  # joining | holding | stalled | store_unavailable | stopped
        self._store, self._engine, self._metrics, self._bus = store, engine, metrics, bus
        self._lag = lag
        self._mono = monotonic
        self._timeout = settings.store.lease_timeout_s
        self._renew_every = self._timeout / 3
        self._claim_every = min(CLAIM_EVERY_S, self._renew_every)
        self._claim_batch = settings.store.claim_batch
        self._stall_s = settings.polling.stall_lag_s
        self._workspaces = [w.name for w in settings.workspaces]
        self._gates = [client.gate for client in engine.clients.values()]
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._renewed_at: float | None = None  # when the last successful renewal was sent
        self._seen_at: float | None = None  # our last heartbeat, by the store's clock
        self._joined_at: float | None = None  # our first after a (re)join, until peers saw it
        self._next_renew = 0.0
        self._stopped = False
        self._counts: deque[tuple[float, int]] = deque()  # (when, live replicas)
        for workspace in self._workspaces:
            # Read from the book at scrape time, as trackings_active is: never stale
            # between the loop's ticks, nor after the loop has stopped.
            held = functools.partial(engine.book.held, workspace)
            metrics.replica_leases.labels(workspace=workspace).set_function(held)

    # -- what others see ------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """The replica's part of ``/readyz``."""
        return {
            "replica": self.id,
            "leases": len(self._engine.entries),
            "peers": list(self.peers),
            "lease_state": self.state,
        }

    def notified(self, payload: str) -> None:
        """A notification from another replica (LISTEN): released work, or new events."""
        if payload == "work":
            self._wake.set()
        elif payload == "events":
            self._bus.publish()  # SSE streams and delivery workers read the store again
            # Callers waiting on a tracking another replica holds read it again.
            self._engine.ends.wake(lambda key: key not in self._engine.entries)

    # -- the loop ---------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        if not self._store.shares_work:
            self.state = "holding"
            self._metrics.replica_peers.set(1)
            self._metrics.store_up.set(1)
            await stop.wait()  # the leases gauge reads the book by itself
            return
        lateness = 0.0
        while not stop.is_set():
            async with self._lock:
                if self._stopped:
                    return
                lag = max(lateness, self._lag.latest_lag_s if self._lag else 0.0)
                if lag > self._stall_s:
                    await self._give_up(lag)
                else:
                    renewed = self._mono() >= self._next_renew and await self._renew()
                    if self.state == "holding" and not self._engine.stopping:
                        if renewed:
                            await self._rebalance()
                        # A renewal come due goes first: on a slow store a claim's round
                        # trips would hold it back until the leases stop reads.
                        if self._mono() < self._next_renew:
                            await self._claim()
                self._metrics.replica_peers.set(len(self.peers))
            wait_s = self._claim_every
            if self.state != "stalled":  # a renewal due sooner is not left waiting
                # (at least a tick: a wait of a rounding error would come back too early)
                wait_s = min(wait_s, max(0.01, self._next_renew - self._mono()))
            due = self._mono() + wait_s
            self._wake.clear()
            await _wait_either(stop, self._wake, wait_s)
            lateness = max(0.0, self._mono() - due)

    async def _renew(self) -> bool:
        sent = self._mono()
        answer = await self._ask(
            self._store.renew_leases(len(self._engine.entries)), "lease renewal"
        )
        if answer is None:
            return False
        lost, peers = answer
        if self.state == "store_unavailable" and self._counts:
            # Back after an outage: peers reappear one by one as they reconnect (each
            # after its own retry and reconnection), so the count from before it
            # holds for two lease timeouts from now.
            self._counts[-1] = (sent + self._timeout, self._counts[-1][1])
        joining = self._joining(peers)
        if joining:
            self.state = "joining"
        elif self.state != "holding":
            log.info("holding leases", extra={"fields": {"replica": self.id, "peers": list(peers)}})
            self.state = "holding"
        self._metrics.store_up.set(1)
        self._renewed_at = sent
        # Joining: heartbeat again soon, to see the peers' next heartbeats.
        self._next_renew = sent + (self._claim_every if joining else self._renew_every)
        for tracking_id in lost:
            self._engine.book.drop(tracking_id)
        self._count_lost(lost)
        self.peers = list(peers) or [self.id]
        share = self._divisor(sent, len(self.peers))
        for gate in self._gates:
            gate.set_share(share)
            gate.hold_leases_until(-math.inf if joining else sent + self._timeout * VALID_FRACTION)
        return True

    def _count_lost(self, lost: Mapping[str, LeaseLoss]) -> None:
        """Every lease a renewal missed, counted by why; logged at the level its reason
        deserves: a tracking that ended is churn, work this replica still held is not."""
        for reason, count in Counter(lost.values()).items():
            self._metrics.leases_lost_total.labels(reason=reason).inc(count)
            level, message = LOSS_LOGS[reason]
            fields = {"replica": self.id, "reason": str(reason), "count": count}
            log.log(level, message, extra={"fields": fields})

    def _joining(self, seen: dict[str, float]) -> bool:
        """Whether reads wait for the peers to count this replica: it is new, or was
        missing from the heartbeat table long enough for them to stop counting it,
        and some live peer has had no heartbeat since (one that cannot be reading
        any more is not waited for). Until then the peers' shares and ours together
        would pass the workspace's limit."""
        now = seen.get(self.id)
        if now is None:  # a single-process store
            return False
        if self._seen_at is None or now - self._seen_at >= self._timeout:
            self._joined_at = now
        self._seen_at = now
        if self._joined_at is None:
            return False
        reading = now - self._timeout * VALID_FRACTION
        if any(
            reading < at < self._joined_at + JOIN_MARGIN_S
            for replica, at in seen.items()
            if replica != self.id
        ):
            return True
        self._joined_at = None
        return False

    def _divisor(self, now: float, live: int) -> int:
        """The largest live count seen over the last lease timeout: a replica that
        vanished from the heartbeat table (or that the others could not see during a
        database outage) may still be polling until its leases have run out, so the
        shares grow only once it has been gone that long. The newest count before
        an outage is kept however old: after it, peers reappear one by one."""
        while len(self._counts) > 1 and self._counts[0][0] < now - self._timeout:
            self._counts.popleft()
        divisor = max([live, *(n for _, n in self._counts)])
        self._counts.append((now, live))
        return divisor

    async def _ask(self, call: Coroutine[Any, Any, T], what: str) -> T | None:
        """``call``'s answer; None after store trouble (an error, or no answer within
        the bound: leases a late commit took lapse unread and are claimed again)."""
        bound = self._timeout * RENEW_BOUND_FRACTION
        try:
            return await bounded(call, bound)
        except StoreError as exc:
            self._store_trouble(exc)
        except TimeoutError:
            self._store_trouble(StoreUnavailable(f"{what} unanswered after {bound:g} s"))
        return None

    def _store_trouble(self, exc: StoreError) -> None:
        """Back off; once the leases must have run out, forget them (others may hold
        them by the time the store answers again)."""
        if self.state != "store_unavailable":
            log.warning(
                "store unreachable: leases kept until they would run out",
                extra={"fields": {"replica": self.id, "error": str(exc)}},
            )
        self.state = "store_unavailable"
        self._metrics.store_up.set(0)
        self._next_renew = self._mono() + min(1.0, self._renew_every)
        if self._renewed_at is None or self._mono() - self._renewed_at >= self._timeout:
            self._drop_all()
            self._store.forget_leases()
            self._renewed_at = None

    async def _give_up(self, lag: float) -> None:
        log.warning(
            "event loop stalled: giving every lease up",
            extra={"fields": {"replica": self.id, "lag_s": round(lag, 3)}},
        )
        self.state = "stalled"
        self._drop_all()
        try:
            await self._store.release_leases()
        except StoreError:
            self._store.forget_leases()
        self._renewed_at = None
        self._next_renew = 0.0  # renew (and so revalidate) on the next healthy tick

    async def _claim(self) -> None:
        answer = await self._ask(self._claim_share(), "claim")
        if answer is None or not answer[1].trackings:
            return
        limit, claimed = answer
        if claimed.takeovers:
            self._metrics.lease_takeovers_total.inc(claimed.takeovers)
        await self._engine.resume(ClaimedBatch(claimed.trackings))
        # Trackings of a workspace this replica has no configuration for: let others.
        held = self._engine.entries
        stray = [t.tracking_id for t in claimed.trackings if t.tracking_id not in held]
        if stray:
            with contextlib.suppress(StoreError):  # else they run out on their own
                await self._store.release_leases(stray)
        log.info(
            "claimed trackings",
            extra={"fields": {"count": len(claimed.trackings), "takeovers": claimed.takeovers}},
        )
        if len(claimed.trackings) >= limit:
            self._wake.set()  # more may be waiting: claim again without the interval

    async def _claim_share(self) -> tuple[int, Claimed]:
        counts = await self._store.active_counts()
        held = len(self._engine.entries)
        limit = fair_claim(self._claim_batch, sum(counts.values()), len(self.peers), held)
        return limit, await self._store.claim_trackings(limit)

    async def _rebalance(self) -> None:
        """Hand back what this replica holds above its share (a newcomer has joined, or
        intake came in through this replica): the trackings due last, none mid-read."""
        engine = self._engine
        counts = await self._ask(self._store.active_counts(), "count")
        if counts is None:
            return
        n = excess(sum(counts.values()), len(self.peers), len(engine.entries))
        if n <= 0:
            return
        chosen = engine.book.hand_back(n)  # from now on nothing reads or writes them
        if not chosen:
            return
        await engine.writer.checkpoint(chosen, engine.clock.now() - engine.clock.monotonic())
        ids = [e.tracking_id for e in chosen]
        # Claimable after the gap a lapsed lease leaves between its holders' reads.
        hold = self._timeout * (1 - VALID_FRACTION)
        # Both steps bounded within what a renewal may take, so the next one is on time.
        bound = self._timeout * RENEW_BOUND_FRACTION / 2
        with contextlib.suppress(StoreError, TimeoutError):  # unwritten: the next holder reads
            await bounded(engine.writer.flush(), bound)  # the counters, any last poll results
        try:
            # Out of the lease book before the first await: never written again.
            await bounded(self._store.release_leases(ids, hold_s=hold), bound)
        except (StoreError, TimeoutError) as exc:
            log.warning("handed-back leases left to run out: %s", exc or "timed out")
        self._metrics.lease_handovers_total.inc(len(ids))
        log.info(
            "handed trackings back to peers",
            extra={"fields": {"count": len(ids), "held": len(engine.entries)}},
        )

    def _drop_all(self) -> None:
        """Nothing more goes out under the leases, and the engine forgets their work."""
        for gate in self._gates:
            gate.give_leases_up()
        self._engine.book.drop_all()

    async def release_all(self) -> None:
        """At shutdown, after the engine stopped: every lease back, so that peers take
        the work at once rather than after the timeout."""
        async with self._lock:
            self._stopped = True
            self.state = "stopped"
            if self._store.shares_work:
                try:
                    await self._store.release_leases()
                except StoreError as exc:
                    log.warning("leases not released: %s", exc)


async def _wait_either(a: asyncio.Event, b: asyncio.Event, wait_s: float) -> None:
    waiters = [asyncio.ensure_future(a.wait()), asyncio.ensure_future(b.wait())]
    try:
        await asyncio.wait(waiters, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
