"""Cancel on a caller's request: only while Moltaro says CanCancel.

A fresh status read decides, never our last poll; the cancel is forwarded only
when that read says ``CanCancel: true``. Tracking goes on to the real terminal
state either way: stopping polling would not stop the server's work.

Intake, query, cancel and abandon answer the same on every replica. The replica
holding the lease does the polling; any replica can forward a cancel
(``HeldElsewhere``) or end a tracking as ``abandoned`` through the engine's
finisher, as the holder would: the store accepts an abandon from a replica without
the lease, and the holder's later writes are then refused because the tracking is
terminal.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orchestrator.engine.writer import abandoned_result
from orchestrator.interpret import interpret
from orchestrator.vocabulary import Outcome
from orchestrator.workspace.client import WorkspaceClient
from orchestrator.workspace.forwarded import failure
from orchestrator.workspace.readresult import ReadResult

if TYPE_CHECKING:
    from orchestrator.engine.poll_metrics import PollMetrics
    from orchestrator.engine.writer import Finisher
    from orchestrator.store.base import Tracking


@dataclass(slots=True)
class CancelAnswer:
    """``status``: 202 accepted; 404/409/422 refused (by the remote status or the
    workspace); 502/503/504 trouble (``extra`` names it: ``workspace.forwarded``)."""

    status: int
    remote_status: str | None
    detail: str
    retry_after: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


async def cancel(
    client: WorkspaceClient,
    kind: str,
    remote_id: str,
    last_status: str | None,
    counted: Callable[[str, float], None],
) -> CancelAnswer:
    """Read a fresh status; forward the cancel only while CanCancel is true.

    ``counted(result, seconds)`` counts the fresh read as a poll.
    """
    blocked = client.gate.blocked_for()
    if blocked > 0:
        return CancelAnswer(
            503,
            last_status,
            "the workspace asked us to wait (Retry-After)",
            retry_after=blocked,
            extra={"error_kind": "rate_limited", "workspace_status": None},
        )
    fresh = await client.read(kind, remote_id)
    counted(fresh.result, fresh.duration)
    if fresh.result != "ok":
        return _failed(fresh, "the fresh status read", last_status, client.token)
    verdict = interpret(kind, fresh.body, client.enums[kind])
    if verdict.can_cancel is not True:
        return CancelAnswer(
            409, verdict.remote_status, "the remote status does not allow cancelling"
        )
    answer = await client.cancel(remote_id)
    if answer.http_status is not None and 200 <= answer.http_status < 300:
        return CancelAnswer(202, verdict.remote_status, "cancel accepted by the workspace")
    return _failed(answer, "the cancel", verdict.remote_status, client.token)


def _failed(
    read: ReadResult, doing: str, remote_status: str | None, token: str | None
) -> CancelAnswer:
    why = failure(read, doing, token)
    return CancelAnswer(why.status, remote_status, why.detail, why.retry_after, why.extra)


class HeldElsewhere:
    """Cancel and abandon of a tracking that another replica polls."""

    def __init__(
        self, clients: dict[str, WorkspaceClient], finisher: Finisher, metrics: PollMetrics
    ) -> None:
        self._clients, self._finisher, self._metrics = clients, finisher, metrics

    async def cancel(self, t: Tracking) -> CancelAnswer | None:
        client = self._clients.get(t.workspace)
        if client is None:
            return None
        # Its reads counted as the holder's cancel counts them (polls and durations).
        counted = functools.partial(self._metrics.polled, t.workspace, t.kind)
        return await cancel(client, t.kind, t.remote_id, t.remote_status, counted)

    async def abandon(self, t: Tracking) -> Tracking | None:
        """End it as ``abandoned`` with its terminal event; None if it ended meanwhile."""
        result = abandoned_result(t.remote_id, t.remote_status)
        return await self._finisher.finish_elsewhere(t, Outcome.ABANDONED, result)
