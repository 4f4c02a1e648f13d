"""A caller's cancel or abandon of a tracking that another replica polls.

Intake, query, cancel and abandon answer the same on every replica. The
replica holding the lease does the polling; any replica can forward a cancel
(a fresh read, then the cancel while CanCancel) or end a tracking as
``abandoned``: the store accepts an abandon from a replica without the lease,
and the holder's later writes are then refused because the tracking is
terminal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.engine.cancel import CancelAnswer, cancel
from orchestrator.store.base import Finish
from orchestrator.vocabulary import Outcome, TrackingState

if TYPE_CHECKING:
    from orchestrator.clock import Clock
    from orchestrator.events.bus import EventBus
    from orchestrator.events.cloudevents import EventFactory
    from orchestrator.metrics import Metrics
    from orchestrator.store.base import Store, Tracking
    from orchestrator.workspace.client import WorkspaceClient


class Unheld:
    def __init__(
        self,
        store: Store,
        clients: dict[str, WorkspaceClient],
        events: EventFactory,
        bus: EventBus,
        metrics: Metrics,
        clock: Clock,
    ) -> None:
        self._store, self._clients, self._events = store, clients, events
        self._bus, self._metrics, self._clock = bus, metrics, clock

    async def cancel(self, t: Tracking) -> CancelAnswer | None:
        client = self._clients.get(t.workspace)
        if client is None:
            return None
        polls = self._metrics.polls_total
        return await cancel(
            client,
            t.kind,
            t.remote_id,
            t.remote_status,
            lambda result, _s: polls.labels(
                workspace=t.workspace, kind=t.kind, result=result
            ).inc(),
        )

    async def abandon(self, t: Tracking) -> Tracking | None:
        """End it as ``abandoned`` with its terminal event; None if it ended meanwhile."""
        now = self._clock.now()
        result = {"remote_id": t.remote_id, "last_remote_status": t.remote_status}
        t.state, t.outcome, t.result = TrackingState.TERMINAL, Outcome.ABANDONED, result
        t.terminal_at, t.next_poll_at = now, None
        event = self._events.terminal(t, now)
        [done] = await self._store.finish(
            [Finish(t.tracking_id, Outcome.ABANDONED, now, result, event)]
        )
        if not done:
            return None
        self._bus.publish()
        self._metrics.trackings_terminal_total.labels(
            workspace=t.workspace, kind=t.kind, outcome=Outcome.ABANDONED
        ).inc()
        return t
