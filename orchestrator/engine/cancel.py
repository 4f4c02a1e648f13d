"""Cancel on a caller's request: only while Moltaro says CanCancel.

A fresh status read decides, never our last poll; the cancel is forwarded only
when that read says ``CanCancel: true``. Tracking goes on to the real terminal
state either way: stopping polling would not stop the server's work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.interpret import interpret
from orchestrator.workspace.client import WorkspaceClient
from orchestrator.workspace.forwarded import failure
from orchestrator.workspace.readresult import ReadResult


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
