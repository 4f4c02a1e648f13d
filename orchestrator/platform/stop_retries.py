"""Stopping a function job's retry chain through Function operations.

The platform takes the job's ``ModifiedAt`` as an optimistic version: we read
the job's projection, send its ``ModifiedAt`` as ``ExpectedModifiedAt``, and
report what the workspace decided. A queued job (or an expired lease) is
finalized at once; a live leased attempt is cancelled cooperatively and may
still complete. Either way the tracking keeps polling to the real terminal
state. Repeating an accepted stop is idempotent; a stale version is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.platform.wire import enum_name, get_ci, text
from orchestrator.workspace.client import WorkspaceClient
from orchestrator.workspace.readresult import ReadResult

STOP_REASON = "job.retry.stopRequested"
_KIND = "function_job"
_TERMINAL = ("Completed", "Failed", "Cancelled")


@dataclass(slots=True)
class StopAnswer:
    """``status``: 202 accepted now, 200 already accepted, 404/409 refused, 502/503 not asked."""

    status: int
    detail: str
    remote: Any = None  # the job projection, when the workspace gave one
    remote_status: str | None = None
    expected_modified_at: str | None = None
    stale: bool = False
    retry_after: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def body(self, tracking_id: str, remote_id: str) -> dict[str, Any]:
        return {
            "tracking_id": tracking_id,
            "remote_id": remote_id,
            "accepted": self.status in (200, 202),
            "already_requested": self.status == 200,
            "detail": self.detail,
            "expected_modified_at": self.expected_modified_at,
            "remote_status": self.remote_status,
            "CancellationReasonCode": text(self.remote, "CancellationReasonCode"),
            "RetryStopState": text(self.remote, "RetryStopState"),
            "remote": self.remote,
        }


def stop_accepted(projection: Any) -> bool:
    """The projection shows an accepted retry-chain stop (requested or finalized)."""
    state = (text(projection, "RetryStopState") or "").lower()
    return text(projection, "CancellationReasonCode") == STOP_REASON or state in (
        "requested",
        "stopped",
    )


class RetryStopper:
    def __init__(self, client: WorkspaceClient, counted: Callable[[str, str], None]) -> None:
        """``counted(route, result)`` counts each administrative request made."""
        self._client = client
        self._counted = counted

    async def stop(self, remote_id: str, expected_modified_at: str | None) -> StopAnswer:
        client = self._client
        paths = client.cfg.paths
        statuses = client.enums[_KIND].values.get("status", {})
        blocked = client.gate.blocked_for()
        if blocked > 0:
            return StopAnswer(
                503, "the workspace asked us to wait (Retry-After)", retry_after=blocked
            )
        version = expected_modified_at
        if version is None:
            read = await self._call("GET", paths.operations_job, remote_id)
            if read.result == "not_found":
                return StopAnswer(404, "Function operations has no such job")
            if read.result != "ok" or not isinstance(read.body, Mapping):
                return StopAnswer(
                    502, f"reading the job from Function operations failed: {read.result}"
                )
            projection = read.body
            status = enum_name(get_ci(projection, "Status"), statuses)
            if stop_accepted(projection):
                return StopAnswer(
                    200, "a retry-chain stop was already accepted", projection, status
                )
            version = text(projection, "ModifiedAt")
            if version is None:
                return StopAnswer(502, "the job projection has no ModifiedAt", projection, status)
        sent = await self._call(
            "POST", paths.stop_retries, remote_id, {"ExpectedModifiedAt": version}
        )
        if sent.http_status in (200, 201, 202) and isinstance(sent.body, Mapping):
            status = enum_name(get_ci(sent.body, "Status"), statuses)
            return StopAnswer(
                202, "retry-chain stop accepted by the workspace", sent.body, status, version
            )
        if sent.http_status == 409:
            return self._refused(sent.body, version, statuses)
        if sent.result == "not_found":
            return StopAnswer(404, "Function operations has no such job", None, None, version)
        return StopAnswer(502, f"stop-retries failed: {sent.result}", None, None, version)

    @staticmethod
    def _refused(body: Any, version: str, statuses: Mapping[int, str]) -> StopAnswer:
        job = get_ci(body, "Job")
        projection = job if isinstance(job, Mapping) else None
        raw_status = get_ci(projection, "Status") if projection else get_ci(body, "Status")
        status = enum_name(raw_status, statuses)
        if projection is not None and stop_accepted(projection):
            return StopAnswer(200, "a retry-chain stop was already accepted", projection, status)
        if status in _TERMINAL:
            return StopAnswer(
                409, f"the job is already terminal ({status})", projection, status, version
            )
        current = text(projection, "ModifiedAt")
        detail = f"ExpectedModifiedAt {version} is stale: the job has changed"
        if current is not None:
            detail += f" (its ModifiedAt is now {current})"
        return StopAnswer(
            409,
            detail + "; read it again and repeat only if the stop is still wanted",
            projection,
            status,
            version,
            stale=True,
            extra={"current_modified_at": current},
        )

    async def _call(self, method: str, template: str, job_id: str, json: Any = None) -> ReadResult:
        read = await self._client.call(method, template.replace("{id}", job_id), json=json)
        self._counted("stop_retries" if method == "POST" else "operations_job", read.result)
        return read
