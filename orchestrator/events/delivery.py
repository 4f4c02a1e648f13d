"""Delivery workers: the outbox drained to sinks and callbacks over HTTP.

One worker per destination (each configured sink, and ``callback`` for every
per-tracking callback URL) claims due deliveries with a lease, runs up to
``max_in_flight`` attempts at once and records each result. A worker sleeps
until the event bus says new events were committed, one of its own retries
falls due, or a short re-check interval passes (which picks up a backlog left
by a previous process or an expired lease). The lease means a process that
dies mid-attempt leaves the delivery due again, never lost: at-least-once.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import random
from collections.abc import Mapping

from orchestrator.aio import wait_event
from orchestrator.clock import Clock, iso
from orchestrator.config import EventsConfig
from orchestrator.errors import StoreUnavailable
from orchestrator.events.attempt import (
    Decision,
    Destination,
    RetryPolicy,
    send_attempt,
)
from orchestrator.events.bus import EventBus
from orchestrator.events.cloudevents import CALLBACK, EventFactory, sink_destination
from orchestrator.events.signing import signing_keys
from orchestrator.events.sinkstate import SinkStates
from orchestrator.metrics import DELIVERY_RESULTS, Metrics
from orchestrator.store.base import Delivery, Store
from orchestrator.transport import HttpTransport, Transport

log = logging.getLogger(__name__)

# Callbacks have no configuration of their own; this bounds one slow host's share.
CALLBACK_MAX_IN_FLIGHT = 32
# A claimed delivery stays invisible to other claims for the attempt's timeout
# plus this margin (time to record the result), after which an attempt lost
# with its process is due again: after a crash, redelivery follows within it.
LEASE_MARGIN_S = 5.0
RECHECK_S = 2.0
PENDING_REFRESH_S = 2.0
STORE_BACKOFF_S = 1.0
# A sink's answer body is not used: only this much of it is read.
ANSWER_LIMIT_BYTES = 64 * 1024


class DeliveryService:
    def __init__(
        self,
        store: Store,
        events: EventsConfig,
        metrics: Metrics,
        clock: Clock,
        bus: EventBus,
        transport: Transport | None = None,
        secrets: Mapping[str, str] | None = None,
        rng: random.Random | None = None,
        keys: Mapping[str, bytes | None] | None = None,
    ) -> None:
        """``keys``: the destinations' signing keys as ``signing_keys()`` resolved
        them (else resolved here, from ``secrets`` or the environment)."""
        self._store = store
        self._events = events
        self._metrics = metrics
        self._clock = clock
        self._bus = bus
        self._transport = transport
        self._rng = rng or random.Random()
        self._lease_s = events.delivery_timeout_s + LEASE_MARGIN_S
        self._stopping = asyncio.Event()
        self._sinks_changed = asyncio.Event()
        self._grace_s = events.delivery_timeout_s
        self._tg: asyncio.TaskGroup | None = None
        self._side_tasks: list[asyncio.Task[None]] = []
        self._dests: dict[str, Destination] = {}
        if keys is None:  # a ConfigError rather than unsigned by accident
            keys = signing_keys(events, secrets)
        for sink in events.sinks:
            key = sink_destination(sink.name)
            dest = self._add(
                key, sink.name, sink.url, sink.max_in_flight, sink.max_age_s, keys[key]
            )
            dest.binary = sink.mode == "binary"
        self._add(
            CALLBACK,
            CALLBACK,
            None,
            CALLBACK_MAX_IN_FLIGHT,
            events.callback_max_age_s,
            keys[CALLBACK],
        )
        self._states = SinkStates(store, EventFactory(events), metrics, bus, self._dests)

    def _add(
        self,
        key: str,
        label: str,
        url: str | None,
        max_in_flight: int,
        max_age_s: float,
        secret: bytes | None,
    ) -> Destination:
        policy = RetryPolicy(self._events.retry_schedule_s, max_age_s, self._rng)
        dest = Destination(key, label, url, max_in_flight, policy, secret)
        self._dests[key] = dest
        self._metrics.event_outbox_pending.labels(sink=label)
        self._metrics.event_delivery_latency_seconds.labels(sink=label)
        for result in DELIVERY_RESULTS:
            self._metrics.event_deliveries_total.labels(sink=label, result=result)
        return dest

    async def load_state(self) -> None:
        """The sinks' disabled states as stored (before the API answers for them)."""
        await self._states.load()

    async def run(self) -> None:
        """Deliver until ``stop()``; an unexpected error in a worker ends run()
        with it (in an ExceptionGroup) after logging it."""
        if self._stopping.is_set():
            return
        if not self._states.loaded:
            await self._states.load()
        own_transport = self._transport is None
        if self._transport is None:
            self._transport = HttpTransport(
                max_connections=sum(d.max_in_flight for d in self._dests.values()),
                max_response_bytes=ANSWER_LIMIT_BYTES,
            )
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                self._side_tasks = [
                    tg.create_task(self._watch_bus(), name="deliveries:bus"),
                    tg.create_task(self._refresh_loop(), name="deliveries:pending"),
                ]
                for dest in list(self._dests.values()):
                    self._spawn(dest)
        finally:
            self._tg = None
            if own_transport:
                await self._transport.close()
                self._transport = None

    def stop(self, grace_s: float | None = None) -> None:
        """Stop claiming; run() returns once in-flight attempts end or after
        ``grace_s`` (default: one attempt timeout), cancelling the stragglers,
        whose leases make them due again on the next start."""
        if grace_s is not None:
            self._grace_s = grace_s
        self._stopping.set()
        for task in self._side_tasks:
            task.cancel()
        for dest in self._dests.values():
            dest.wake.set()

    def _spawn(self, dest: Destination) -> None:
        if self._tg is not None and not self._stopping.is_set():
            self._tg.create_task(self._work(dest), name=f"deliveries:{dest.key}")

    async def _watch_bus(self) -> None:
        while not self._stopping.is_set():
            # Nothing awaits between two wait() calls, so no publish is missed.
            if await self._bus.wait(60.0):
                for dest in self._dests.values():
                    dest.wake.set()

    def sinks_changed(self) -> None:
        """Another replica disabled or enabled a sink (its NOTIFY): read the states now."""
        self._sinks_changed.set()

    async def _refresh_loop(self) -> None:
        while True:
            await self._refresh_pending()
            self._sinks_changed.clear()
            if self._store.shares_work:  # other replicas' changes, without a restart
                await self._states.sync()
            await wait_event(self._sinks_changed, PENDING_REFRESH_S)

    async def _refresh_pending(self) -> None:
        try:
            counts = await self._store.outbox_pending_counts()
        except StoreUnavailable as exc:
            log.warning("outbox counts unavailable: %s", exc)
            return
        for key in counts:
            if key not in self._dests:
                # Pending rows for a sink removed from the configuration: drained
                # to dead so that they are visible and can be re-driven.
                label = key.removeprefix("sink:")
                events = self._events
                self._spawn(self._add(key, label, None, 1, events.callback_max_age_s, None))
        for dest in self._dests.values():
            self._metrics.event_outbox_pending.labels(sink=dest.label).set(counts.get(dest.key, 0))
            await self._states.save(dest)  # one the store could not take before

    async def _work(self, dest: Destination) -> None:
        in_flight: set[asyncio.Task[None]] = set()

        def done(task: asyncio.Task[None]) -> None:
            in_flight.discard(task)
            dest.wake.set()

        try:
            async with asyncio.TaskGroup() as attempts:
                while not self._stopping.is_set():
                    dest.wake.clear()
                    if dest.disabled is not None:
                        await wait_event(dest.wake, RECHECK_S)  # enable() wakes it
                        continue
                    wait = dest.throttled_until - self._clock.now()
                    if wait > 0:
                        await wait_event(self._stopping, wait)
                        continue
                    free = dest.max_in_flight - len(in_flight)
                    if free > 0:
                        now = self._clock.now()
                        while dest.due and dest.due[0] <= now:
                            heapq.heappop(dest.due)
                        try:
                            claimed = await self._store.claim_deliveries(
                                dest.key, now, free, self._lease_s
                            )
                        except StoreUnavailable as exc:
                            log.warning("deliveries to %s: store unavailable: %s", dest.label, exc)
                            await wait_event(self._stopping, STORE_BACKOFF_S)
                            continue
                        for delivery in claimed:
                            name = f"delivery:{dest.key}:{delivery.delivery_id}"
                            task = attempts.create_task(self._attempt(dest, delivery), name=name)
                            in_flight.add(task)
                            task.add_done_callback(done)
                        if claimed and len(claimed) == free:
                            continue
                    await self._sleep(dest)
                await self._drain(dest, in_flight)
        except Exception:
            log.exception("delivery worker for %s failed", dest.label)
            raise

    async def _sleep(self, dest: Destination) -> None:
        timeout = RECHECK_S
        if dest.due:
            timeout = min(timeout, max(dest.due[0] - self._clock.now(), 0.0))
        await wait_event(dest.wake, timeout)

    async def _drain(self, dest: Destination, in_flight: set[asyncio.Task[None]]) -> None:
        if not in_flight:
            return
        _, pending = await asyncio.wait(set(in_flight), timeout=self._grace_s)
        if pending:
            log.warning(
                "deliveries to %s: %d attempts still running at shutdown were cancelled;"
                " they are due again after their lease",
                dest.label,
                len(pending),
            )
            for task in pending:
                task.cancel()

    async def _attempt(self, dest: Destination, delivery: Delivery) -> None:
        try:
            decision = await self._send(dest, delivery)
            await self._record(dest, delivery, decision)
        except StoreUnavailable as exc:
            log.warning(
                "delivery %d: result not recorded (%s); it is due again after its lease",
                delivery.delivery_id,
                exc,
            )

    async def _send(self, dest: Destination, delivery: Delivery) -> Decision:
        url = delivery.url if dest.key == CALLBACK else dest.url
        if not url:
            return Decision("dead", error="destination is not configured")
        assert self._transport is not None
        timeout = self._events.delivery_timeout_s
        return await send_attempt(self._transport, dest, url, delivery, timeout, self._clock)

    async def _record(self, dest: Destination, delivery: Delivery, decision: Decision) -> None:
        now = self._clock.now()
        counter = self._metrics.event_deliveries_total.labels(
            sink=dest.label, result=decision.result
        )
        if decision.gone and dest.is_sink:
            # Disabled first, so that no other replica claims it back in between (a
            # shared store's claims skip disabled sinks); kept pending, to wait for
            # the sink to be enabled.
            dest.last_error = decision.error
            await self._states.disable(dest, now, decision.error or "HTTP 410")
            error = f"{decision.error}; the sink is disabled"
            await self._store.mark_retry(delivery.delivery_id, now, decision.status, error)
            self._metrics.event_deliveries_total.labels(sink=dest.label, result="retry").inc()
            return
        if dest.is_sink:
            why = dest.health(decision, now, self._events.disable_after_s)
            if why is not None:
                await self._states.disable(dest, now, why)
        if decision.result == "delivered":
            assert decision.status is not None
            await self._store.mark_delivered(delivery.delivery_id, now, decision.status)
            self._metrics.event_delivery_latency_seconds.labels(sink=dest.label).observe(
                max(0.0, now - delivery.event_time)
            )
        elif decision.result == "dead":
            await self._store.mark_dead(
                delivery.delivery_id, now, decision.status, decision.error or ""
            )
            log.warning(
                "delivery %d of event %s to %s is dead: %s",
                delivery.delivery_id,
                delivery.event_id,
                dest.label,
                decision.error,
            )
        else:
            assert decision.next_attempt_at is not None
            await self._store.mark_retry(
                delivery.delivery_id,
                decision.next_attempt_at,
                decision.status,
                decision.error or "",
            )
            heapq.heappush(dest.due, decision.next_attempt_at)
            if decision.throttle and dest.key != CALLBACK:
                # Callbacks share one worker across hosts: only that event waits.
                if decision.next_attempt_at > dest.throttled_until:
                    log.warning(
                        "sink %s throttled until %s: %s",
                        dest.label,
                        iso(decision.next_attempt_at),
                        decision.error,
                    )
                dest.throttled_until = max(dest.throttled_until, decision.next_attempt_at)
        counter.inc()

    def sinks(self) -> list[dict[str, object]]:
        """Each configured sink's state, for ``GET /v1/sinks``."""
        now = self._clock.now()
        return [d.state(now) for d in self._dests.values() if d.is_sink and d.url is not None]

    async def enable(self, name: str) -> bool | None:
        """Turn a sink back on (what it missed is still pending and goes now).
        True if it was disabled, False if it was not, None for no such sink;
        StoreUnavailable when the change cannot be stored."""
        return await self._states.enable(name, self._clock.now())
