"""Cancel on a caller's request: only while Moltaro says CanCancel.

A fresh status read decides, never our last poll; the cancel is forwarded only
when that read says ``CanCancel: true``. Tracking goes on to the real terminal
state either way: stopping polling would not stop the server's work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.interpret import interpret

if TYPE_CHECKING:
    from orchestrator.engine.engine import Engine


@dataclass(slots=True)
class CancelAnswer:
    status: int  # 202 accepted, 409 refused, 502/503 could not ask
    remote_status: str | None
    detail: str
    retry_after: float | None = None


async def cancel(engine: Engine, tracking_id: str) -> CancelAnswer | None:
    """Read a fresh status; forward the cancel only while CanCancel is true."""
    entry = engine.entries.get(tracking_id)
    if entry is None:
        return None
    client = engine.clients[entry.workspace]
    blocked = client.gate.blocked_for()
    if blocked > 0:
        return CancelAnswer(
            503,
            entry.remote_status,
            "the workspace asked us to wait (Retry-After)",
            retry_after=blocked,
        )
    fresh = await client.read(entry.kind, entry.remote_id)
    engine.probes.polled(entry.workspace, entry.kind, fresh.result, fresh.duration)
    if fresh.result != "ok":
        return CancelAnswer(502, entry.remote_status, f"fresh status read failed: {fresh.result}")
    verdict = interpret(entry.kind, fresh.body, client.enums[entry.kind])
    if verdict.can_cancel is not True:
        return CancelAnswer(
            409, verdict.remote_status, "the remote status does not allow cancelling"
        )
    answer = await client.cancel(entry.remote_id)
    if answer.http_status is not None and 200 <= answer.http_status < 300:
        engine.nudge(tracking_id)
        return CancelAnswer(202, verdict.remote_status, "cancel accepted by the workspace")
    if answer.http_status == 409:
        return CancelAnswer(409, verdict.remote_status, "the workspace refused the cancel")
    return CancelAnswer(502, verdict.remote_status, f"cancel failed: {answer.result}")
