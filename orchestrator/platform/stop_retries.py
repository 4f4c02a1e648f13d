"""Stopping a function job's retry chain through Function operations.

The platform takes the job's ``ModifiedAt`` as an optimistic version: we read
the job's projection, send its ``ModifiedAt`` as ``ExpectedModifiedAt``, and
report what the workspace decided. A queued job (or an expired lease) is
finalized at once; a live leased attempt is cancelled cooperatively and may
still complete. Either way the tracking keeps polling to the real terminal
state. Repeating an accepted stop is idempotent; a stale version is refused.

In this order: a stop already accepted for the job answers 200
``already_requested`` whatever version it carries, and a projection that says
``CanStopRetries: false`` a 409 naming its ``RetryStopState``, both without a
request; only then the POST with ``ExpectedModifiedAt``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.interpret._read import TERMINAL_JOB, enum_name, get_ci, model_of, text
from orchestrator.vocabulary import Kind
from orchestrator.workspace.client import WorkspaceClient
from orchestrator.workspace.forwarded import failure, safe_problem
from orchestrator.workspace.readresult import ReadResult

STOP_REASON = "job.retry.stopRequested"
_KIND = Kind.FUNCTION_JOB
_ALREADY = "a retry-chain stop was already accepted"
_REMEMBERED = 10_000  # jobs whose accepted stop is remembered, the oldest forgotten first


@dataclass(slots=True)
class StopAnswer:
    """``status``: 202 accepted now, 200 already accepted, 404/409/422 refused,
    502/503/504 trouble (``extra`` names it: ``workspace.forwarded``)."""

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


def _cannot_stop(projection: Mapping[str, Any] | None, status: str | None) -> StopAnswer | None:
    """A 409 when the projection says the chain cannot be stopped now (no request)."""
    if projection is None or get_ci(projection, "CanStopRetries") is not False:
        return None
    state = text(projection, "RetryStopState")
    return StopAnswer(
        409,
        f"the job's projection says CanStopRetries: false (RetryStopState: {state})",
        projection,
        status,
        extra={"CanStopRetries": False},
    )


class RetryStopper:
    def __init__(self, client: WorkspaceClient, counted: Callable[[str, str], None]) -> None:
        """``counted(route, result)`` counts each administrative request made."""
        self._client = client
        self._counted = counted
        # Job ids whose stop this process saw accepted, with the projection that said so.
        self._accepted: dict[str, Any] = {}

    def _remember(self, remote_id: str, projection: Any) -> None:
        self._accepted[remote_id] = projection
        if len(self._accepted) > _REMEMBERED:
            del self._accepted[next(iter(self._accepted))]

    async def stop(
        self, remote_id: str, expected_modified_at: str | None, known: Any = None
    ) -> StopAnswer:
        """``known``: the latest status body the tracking holds (read no request for it)."""
        client = self._client
        paths = client.cfg.paths
        statuses = client.enums[_KIND].values.get("status", {})
        held = model_of(known) if isinstance(known, Mapping) else None
        if remote_id in self._accepted and not stop_accepted(held):
            held = self._accepted[remote_id]  # fresher than the stored body
        held_status = enum_name(get_ci(held, "Status"), statuses)
        if remote_id in self._accepted or stop_accepted(held):
            return StopAnswer(200, _ALREADY, held, held_status)
        refused = _cannot_stop(held, held_status)
        if refused is not None:
            return refused
        blocked = client.gate.blocked_for()
        if blocked > 0:
            return StopAnswer(
                503,
                "the workspace asked us to wait (Retry-After)",
                retry_after=blocked,
                extra={"error_kind": "rate_limited", "workspace_status": None},
            )
        version = expected_modified_at
        if version is None:
            read = await self._call("GET", paths.operations_job, remote_id)
            if read.result != "ok" or not isinstance(read.body, Mapping):
                return self._failed(read, "reading the job from Function operations")
            projection = read.body
            status = enum_name(get_ci(projection, "Status"), statuses)
            if stop_accepted(projection):
                self._remember(remote_id, projection)
                return StopAnswer(200, _ALREADY, projection, status)
            refused = _cannot_stop(projection, status)
            if refused is not None:
                return refused
            version = text(projection, "ModifiedAt")
            if version is None:
                return StopAnswer(
                    502,
                    "the job projection has no ModifiedAt",
                    projection,
                    status,
                    extra={"error_kind": "invalid_response", "workspace_status": read.http_status},
                )
        sent = await self._call(
            "POST", paths.stop_retries, remote_id, {"ExpectedModifiedAt": version}
        )
        if sent.http_status in (200, 201, 202) and isinstance(sent.body, Mapping):
            status = enum_name(get_ci(sent.body, "Status"), statuses)
            self._remember(remote_id, sent.body)
            return StopAnswer(
                202, "retry-chain stop accepted by the workspace", sent.body, status, version
            )
        if sent.http_status == 409:
            answer = self._refused(sent.body, version, statuses)
            if answer.status == 200:
                self._remember(remote_id, answer.remote)
            else:
                answer.extra.update(
                    workspace_status=409,
                    workspace_problem=safe_problem(sent.body, client.token),
                )
            return answer
        return self._failed(sent, "the stop-retries command", version)

    def _failed(self, read: ReadResult, doing: str, version: str | None = None) -> StopAnswer:
        why = failure(read, doing, self._client.token)
        return StopAnswer(
            why.status,
            why.detail,
            expected_modified_at=version,
            retry_after=why.retry_after,
            extra=why.extra,
        )

    @staticmethod
    def _refused(body: Any, version: str, statuses: Mapping[int, str]) -> StopAnswer:
        job = get_ci(body, "Job")
        projection = job if isinstance(job, Mapping) else None
        raw_status = get_ci(projection, "Status") if projection else get_ci(body, "Status")
        status = enum_name(raw_status, statuses)
        if projection is not None and stop_accepted(projection):
            return StopAnswer(200, _ALREADY, projection, status)
        if status in TERMINAL_JOB:
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
