"""A caller's cancel or abandon of a tracking that another replica polls.

Intake, query, cancel and abandon answer the same on every replica. The
replica holding the lease does the polling; any replica can forward a cancel
(a fresh read, then the cancel while CanCancel) or end a tracking as
``abandoned`` through the engine's finisher, as the holder would: the store
accepts an abandon from a replica without the lease, and the holder's later
writes are then refused because the tracking is terminal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.engine.cancel import CancelAnswer, cancel
from orchestrator.engine.writer import abandoned_result
from orchestrator.vocabulary import Outcome

if TYPE_CHECKING:
    from orchestrator.engine.writer import Finisher
    from orchestrator.metrics import Metrics
    from orchestrator.store.base import Tracking
    from orchestrator.workspace.client import WorkspaceClient


class HeldElsewhere:
    def __init__(
        self, clients: dict[str, WorkspaceClient], finisher: Finisher, metrics: Metrics
    ) -> None:
        self._clients, self._finisher, self._metrics = clients, finisher, metrics

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
        result = abandoned_result(t.remote_id, t.remote_status)
        return await self._finisher.finish_elsewhere(t, Outcome.ABANDONED, result)
