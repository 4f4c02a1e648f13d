"""Kind ``schedule``: a function schedule, then its jobs and runs by ScheduleId.

One poll reads the schedule and the Function operations jobs and runs filtered
by its ScheduleId, and reports each newly finished occurrence once. It ends
``cancelled`` (reason ``schedule_disabled``) once the schedule is disabled,
``not_found`` (reason ``schedule_deleted``) after the usual confirmations, or
at its deadline.

Exactly once, across restarts: each occurrence comes with the snapshot of the
follow state that records it as reported, and the engine writes its event in
the same transaction as that snapshot (the tracking's ``remote``), so after a
crash either both are stored or neither.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from orchestrator.clock import iso
from orchestrator.interpret import Phase
from orchestrator.kinds.base import Judgement, PollTarget
from orchestrator.platform.occurrences import FollowState, Scan, mark, public, scan, settle
from orchestrator.platform.operations import read_rows
from orchestrator.platform.wire import as_timestamp, get_ci, text
from orchestrator.workspace.readresult import ReadResult

if TYPE_CHECKING:
    from orchestrator.store.base import Tracking
    from orchestrator.workspace.client import WorkspaceClient

_SCHEDULE_FIELDS = (
    "ScheduleId",
    "BusinessFunctionId",
    "FunctionKey",
    "Cron",
    "TimeZone",
    "Status",
    "NextRunAt",
    "LastStatus",
    "TargetHealth",
    "ActiveJobId",
)


@dataclass(slots=True)
class _Followed:
    state: FollowState
    schedule: Any = None  # the last schedule body read
    pending: list[dict[str, Any]] = field(default_factory=list)

    def remote(self) -> dict[str, Any]:
        """What the tracking stores as ``remote``: the schedule and what was reported."""
        return {
            "Schedule": self.schedule,
            "ActiveOccurrences": [public(o) for o in self.pending],
            "Follow": self.state.to_json(),
        }

    def fingerprint(self) -> str:
        parts = [get_ci(self.schedule, name) for name in _SCHEDULE_FIELDS]
        parts.append([(o["key"], o["job_status"], o["run_status"]) for o in self.pending])
        parts.append(self.state.count)
        return hashlib.blake2b(orjson.dumps(parts, default=str), digest_size=8).hexdigest()

    def summary(self) -> dict[str, Any]:
        sched = self.schedule
        return {
            "schedule": {name: get_ci(sched, name) for name in _SCHEDULE_FIELDS}
            if isinstance(sched, Mapping)
            else None,
            "occurrences_reported": self.state.count,
            "last_occurrence": self.state.last,
            "active_occurrences": [public(o) for o in self.pending],
        }


class _Reads(NamedTuple):
    """What one poll of a schedule read."""

    followed: _Followed
    sched: ReadResult
    found: Scan | None
    trouble: ReadResult | None
    reads: list[ReadResult]


def _not_an_object(read: ReadResult) -> ReadResult:
    return ReadResult(
        "invalid_response",
        read.http_status,
        error={"kind": "invalid_response", "message": "schedule body is not an object"},
        duration=read.duration,
    )


class ScheduleHandler:
    def __init__(self) -> None:
        self._followed: dict[str, _Followed] = {}

    def adopt(self, t: Tracking, client: WorkspaceClient) -> tuple[str, bytes | None, float | None]:
        remote = t.remote if isinstance(t.remote, Mapping) else {}
        self._followed[t.tracking_id] = _Followed(
            FollowState.from_json(remote.get("Follow"), t.created_at), remote.get("Schedule")
        )
        return "", None, None

    def forget(self, tracking_id: str) -> None:
        self._followed.pop(tracking_id, None)

    async def read(self, target: PollTarget, client: WorkspaceClient) -> _Reads:
        followed = self._followed.get(target.tracking_id)
        if followed is None:
            followed = self._followed[target.tracking_id] = _Followed(
                FollowState(target.created_at)
            )
        path = client.cfg.paths.schedule.replace("{id}", target.remote_id)
        sched = await client.call("GET", path)
        reads = [sched]
        trouble = sched if sched.result not in ("ok", "not_found") else None
        if sched.result == "ok" and not isinstance(sched.body, Mapping):
            trouble = _not_an_object(sched)
        found: Scan | None = None
        if trouble is None:
            found, trouble = await self._read_occurrences(target, client, followed, reads)
        return _Reads(followed, sched, found, trouble, reads)

    def judge(self, target: PollTarget, client: WorkspaceClient, found: _Reads) -> Judgement:
        return self._judge(target, *found)

    async def _read_occurrences(
        self,
        target: PollTarget,
        client: WorkspaceClient,
        followed: _Followed,
        reads: list[ReadResult],
    ) -> tuple[Scan | None, ReadResult | None]:
        query = {
            "source": "Schedule",
            "schedule_id": target.remote_id,
            "from": iso(followed.state.since) or "",
        }
        jobs, jread = await read_rows(client, "function_jobs", query, "JobId", "CreatedAt")
        reads.append(jread)
        if jobs is None:
            return None, jread
        runs, rread = await read_rows(client, "function_runs", query, "RunId", "StartedAt")
        reads.append(rread)
        if runs is None:
            return None, rread
        enums = client.enums["function_job"].values
        job_status, run_status = enums.get("status", {}), enums.get("run.status", {})
        return scan(followed.state, jobs, runs, job_status, run_status), None

    @staticmethod
    def _judge(
        target: PollTarget,
        followed: _Followed,
        sched: ReadResult,
        found: Scan | None,
        trouble: ReadResult | None,
        reads: list[ReadResult],
    ) -> Judgement:
        reported: list[tuple[Any, dict[str, Any]]] = []
        if found is not None:
            followed.pending = found.pending
            for occurrence in found.finished:
                mark(followed.state, occurrence)
                reported.append((followed.remote(), public(occurrence)))
            settle(followed.state, found)
        retry_after = max((r.retry_after for r in reads if r.retry_after), default=None)
        j = Judgement(
            sched.result if trouble is None else trouble.result,
            [(r.result, r.duration) for r in reads],
            answered=all(r.answered for r in reads),
            retry_after=retry_after,
            error=None if trouble is None else trouble.error,
            occurrences=reported,
            not_found_reason="schedule_deleted",
        )
        if trouble is None and sched.result == "ok":
            followed.schedule = sched.body
            status = text(sched.body, "Status")
            j.phase = Phase.PENDING
            j.remote_status = status
            if (status or "").lower() == "disabled":
                j.phase = Phase.CANCELLED
                j.result = {"remote_id": target.remote_id, "reason": "schedule_disabled"}
                j.result.update(followed.summary())
            j.fingerprint = followed.fingerprint()
            next_run = as_timestamp(get_ci(followed.schedule, "NextRunAt"))
            if next_run is not None and not followed.pending:
                j.read_by = next_run  # between occurrences: read just after the next one
        j.remote = followed.remote()
        j.summary = followed.summary()
        return j

    async def conclude(
        self, target: PollTarget, client: WorkspaceClient, judgement: Judgement
    ) -> dict[str, Any] | None:
        return judgement.result
