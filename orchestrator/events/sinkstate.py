"""Disabling and enabling sinks: the worker's view, the stored state, the event, the metric.

A sink disabled by a 410 or by ``events.disable_after_s`` stays disabled across
restarts (the store keeps it) until ``POST /v1/sinks/{name}/enable``. Each change
is written with its operational CloudEvent (``sink.disabled`` / ``sink.enabled``)
in one transaction, so the other sinks hear of it exactly as of a tracking's end.

Replicas on one store share the state: ``sync`` adopts what another replica
stored (woken by its NOTIFY, else on the delivery workers' refresh interval),
and records nothing itself, so each change keeps its one event.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from orchestrator.errors import StoreError, StoreUnavailable
from orchestrator.events.attempt import Destination
from orchestrator.events.bus import EventBus
from orchestrator.events.cloudevents import (
    SINK_DISABLED,
    SINK_ENABLED,
    EventFactory,
    sink_destination,
)
from orchestrator.metrics import Metrics
from orchestrator.store.base import DisabledSink, NewEvent, Store

log = logging.getLogger(__name__)


@dataclass(eq=False)
class SinkStates:
    store: Store
    factory: EventFactory
    metrics: Metrics
    bus: EventBus
    dests: Mapping[str, Destination]
    loaded: bool = field(default=False, init=False)
    # Local changes: a sync that read before one of them is void.
    _changes: int = field(default=0, init=False)

    async def load(self) -> None:
        """The stored disabled states onto the configured sinks (once, at start)."""
        for stored in await self.store.disabled_sinks():
            dest = self.dests.get(stored.destination)
            if dest is None or dest.url is None:
                continue  # no longer configured: it keeps the state if it comes back
            dest.disable(stored.since, stored.reason)
            self.metrics.sink_disabled.labels(sink=dest.label).set(1)
            log.warning(
                "sink %s is disabled since a previous run: %s; POST /v1/sinks/%s/enable to resume",
                dest.label,
                stored.reason,
                dest.label,
            )
        self.loaded = True

    async def sync(self) -> None:
        """Adopt the disabled states other replicas stored, and their enables."""
        before = self._changes
        try:
            stored = {s.destination: s for s in await self.store.disabled_sinks()}
        except StoreError as exc:
            log.warning("sink states not read: %s", exc)
            return
        if self._changes != before:
            return  # this replica changed one meanwhile: the rows read may predate it
        for dest in self.dests.values():
            row = stored.get(dest.key)
            if dest.url is None or not dest.is_sink:
                continue
            if row is not None and dest.disable(row.since, row.reason):
                dest.saved = True  # stored already, with its event
                self.metrics.sink_disabled.labels(sink=dest.label).set(1)
                log.warning("sink %s disabled by another replica: %s", dest.label, row.reason)
            elif row is None and dest.disabled is not None and dest.saved:
                dest.enable()
                self.metrics.sink_disabled.labels(sink=dest.label).set(0)
                log.info("sink %s enabled by another replica", dest.label)

    async def disable(self, dest: Destination, now: float, why: str) -> None:
        if dest.url is None or not dest.disable(now, why):
            return  # a sink no longer configured drains to dead; or it already was
        self._changes += 1
        self.metrics.sink_disabled.labels(sink=dest.label).set(1)
        log.warning(
            "sink %s disabled: %s; POST /v1/sinks/%s/enable to resume",
            dest.label,
            why,
            dest.label,
        )
        dest.saved = False
        await self.save(dest)

    async def save(self, dest: Destination) -> None:
        """Store a disabled state not stored yet, with its event; a store that cannot
        write now leaves it to the next call (the worker's refresh retries it)."""
        if dest.disabled is None or dest.saved:
            return
        since, why = dest.disabled
        try:
            event = await self._event(SINK_DISABLED, dest, since)
            await self.store.disable_sink(DisabledSink(dest.key, since, why), event)
        except StoreUnavailable as exc:
            log.warning("sink %s: disabled state not stored yet: %s", dest.label, exc)
            return
        dest.saved = True
        self._changes += 1
        self.bus.publish()  # the other sinks' workers claim the event now

    async def enable(self, name: str, now: float) -> bool | None:
        """True if it was disabled, False if not, None for no such sink. Raises
        StoreUnavailable (nothing changed) when the change cannot be stored."""
        dest = self.dests.get(sink_destination(name))
        if dest is None or dest.url is None:
            return None
        if dest.disabled is None and self.store.shares_work:
            await self.sync()  # disabled by another replica a moment ago?
        if dest.disabled is None:
            return False
        self._changes += 1
        # Written only where the disabled state was (a state the store never took
        # had no event either, so neither has its end).
        event = await self._event(SINK_ENABLED, dest, now, enabled=True)
        if await self.store.enable_sink(dest.key, event):
            self.bus.publish()
        dest.enable()
        self.metrics.sink_disabled.labels(sink=dest.label).set(0)
        log.info("sink %s enabled", dest.label)
        return True

    async def _event(
        self, type_: str, dest: Destination, now: float, *, enabled: bool = False
    ) -> NewEvent:
        counts = await self.store.outbox_pending_counts()
        state = dest.state(now)
        if enabled:  # the state it is in from now on
            state.update(disabled=False, disabled_since=None, disabled_reason=None)
        state["pending"] = counts.get(dest.key, 0)
        return self.factory.sink_event(type_, dest.label, state, now)
