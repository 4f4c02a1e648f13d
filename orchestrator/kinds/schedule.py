"""Kind ``schedule``: a function schedule, then its jobs and runs by ScheduleId.

One poll reads the schedule and the Function operations jobs and runs filtered
by its ScheduleId, and reports each newly finished occurrence once. It ends
``cancelled`` (reason ``schedule_disabled``) once the schedule is disabled,
``not_found`` (reason ``schedule_deleted``) after the usual confirmations, or
at its deadline. Disabling or deleting a schedule stops new occurrences, not
the work already created (contract section 2): the tracking first follows
every job it still has in progress, and the one the schedule last named
active, to its end and reports it.

Adaptive polling: the occurrences are function jobs of the schedule's target, so
the durations of those that end teach that function's class (the same as a
``function_job`` of it), and the reads of one still running are planned by it
(``Judgement.class_work``).

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
from orchestrator.interpret._read import as_timestamp, get_ci, text
from orchestrator.kinds.base import (
    Adopted,
    Judgement,
    KindHandler,
    PollTarget,
    WorkSeen,
    owned,
    poll_reads,
)
from orchestrator.platform.occurrences import FollowState, Scan, mark, public, scan, settle
from orchestrator.platform.run_history import read_rows
from orchestrator.vocabulary import Kind
from orchestrator.workspace.readresult import ReadResult, invalid

if TYPE_CHECKING:
    from orchestrator.store.base import Tracking
    from orchestrator.workspace.client import WorkspaceClient

_NOT_AN_OBJECT = "schedule body is not an object"
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
            "awaiting_job_id": self.state.awaiting,
        }

    def holding(self) -> bool:
        """Stopped, with work it had created still to end."""
        return self.state.stopped and (bool(self.pending) or self.state.awaiting is not None)


class _ScheduleReads(NamedTuple):
    """What one poll of a schedule read."""

    followed: _Followed
    sched: ReadResult
    found: Scan | None
    trouble: ReadResult | None
    reads: list[ReadResult]
    stopped: bool  # read disabled, or deleted (404)
    awaiting: str | None  # the job to follow to its end once stopped


def _class_work(found: Scan, schedule: Any) -> list[WorkSeen]:
    """The newly finished job occurrences and, unless one fails closed (read by the
    backoff until its evidence comes), the running ones, each by its own FunctionKey
    (else the schedule's) and times."""
    fallback = text(schedule, "FunctionKey")
    keys = [o["key"] for o in found.finished]
    ended = len(keys)
    if not found.anomalies:
        keys += [o["key"] for o in found.pending]
    out: list[WorkSeen] = []
    for i, key in enumerate(keys):
        times = found.times.get(key)
        if times is None or times.created_at is None:
            continue  # a Skipped run is no job; a job without its CreatedAt has no age
        function_key = times.function_key or fallback
        if function_key is None or (i < ended and times.ended_at is None):
            continue  # no class, or an end we cannot date
        out.append(WorkSeen(Kind.FUNCTION_JOB, function_key, times.created_at, times.ended_at))
    return out


class ScheduleHandler(KindHandler):
    def adopt(self, t: Tracking, client: WorkspaceClient) -> Adopted:
        remote = t.remote if isinstance(t.remote, Mapping) else {}
        follow = FollowState.from_json(remote.get("Follow"), t.created_at)
        return Adopted(state=_Followed(follow, remote.get("Schedule")))

    async def poll(self, target: PollTarget, client: WorkspaceClient) -> Judgement:
        return self._judge(target, await self._read(target, client))

    async def _read(self, target: PollTarget, client: WorkspaceClient) -> _ScheduleReads:
        followed = owned(target, _Followed)
        path = client.cfg.paths.schedule.replace("{id}", target.remote_id)
        sched = await client.call("GET", path)
        reads = [sched]
        trouble = sched if sched.result not in ("ok", "not_found") else None
        if sched.result == "ok" and not isinstance(sched.body, Mapping):
            trouble = invalid(sched, _NOT_AN_OBJECT)
        stopped = sched.result == "not_found" or (
            trouble is None and (text(sched.body, "Status") or "").lower() == "disabled"
        )
        awaiting = followed.state.awaiting
        if stopped and not followed.state.stopped:
            # The job it had already created: the last schedule body read names it.
            last = sched.body if sched.result == "ok" else followed.schedule
            awaiting = text(last, "ActiveJobId")
        found: Scan | None = None
        if trouble is None:
            found, trouble, awaiting = await self._read_occurrences(
                target, client, followed, reads, awaiting
            )
        return _ScheduleReads(followed, sched, found, trouble, reads, stopped, awaiting)

    async def _read_occurrences(
        self,
        target: PollTarget,
        client: WorkspaceClient,
        followed: _Followed,
        reads: list[ReadResult],
        awaiting: str | None,
    ) -> tuple[Scan | None, ReadResult | None, str | None]:
        paths = client.cfg.paths
        query = {
            "source": "Schedule",
            "schedule_id": target.remote_id,
            "from": iso(followed.state.since) or "",
        }
        jobs, jread = await read_rows(client, "function_jobs", query, "JobId", "CreatedAt")
        reads.append(jread)
        if jobs is None:
            return None, jread, awaiting
        if awaiting is not None and f"job:{awaiting}" in followed.state.reported:
            awaiting = None
        if awaiting is not None and awaiting not in {text(row, "JobId") for row in jobs}:
            # Created before this tracking's watermark: the list does not show it.
            direct = await client.call("GET", paths.operations_job.replace("{id}", awaiting))
            reads.append(direct)
            if direct.result == "not_found":
                awaiting = None  # nothing left to follow
            elif direct.result != "ok":
                return None, direct, awaiting
            elif not isinstance(direct.body, Mapping):
                return None, invalid(direct, _NOT_AN_OBJECT), awaiting
            else:
                jobs = [*jobs, direct.body]
        runs, rread = await read_rows(client, "function_runs", query, "RunId", "StartedAt")
        reads.append(rread)
        if runs is None:
            return None, rread, awaiting
        enums = client.enums[Kind.FUNCTION_JOB].values
        job_status, run_status = enums.get("status", {}), enums.get("run.status", {})
        return scan(followed.state, jobs, runs, job_status, run_status), None, awaiting

    @staticmethod
    def _judge(target: PollTarget, read: _ScheduleReads) -> Judgement:
        followed, sched, found, trouble, reads, stopped, awaiting = read
        reported: list[tuple[Any, dict[str, Any]]] = []
        state = followed.state
        work: list[WorkSeen] = []
        if found is not None:
            # Set before marking, so that reporting the awaited job clears it.
            state.stopped, state.awaiting = stopped, awaiting if stopped else None
            followed.pending = found.pending
            for occurrence in found.finished:
                mark(followed.state, occurrence)
                reported.append((followed.remote(), public(occurrence)))
            settle(followed.state, found)
            schedule_body = sched.body if sched.result == "ok" else followed.schedule
            work = _class_work(found, schedule_body)
        polled = poll_reads(sched.result, reads, trouble)
        awaiting_work = found is None or followed.holding()
        anomaly: str | None = None
        details: dict[str, Any] | None = None
        if found is not None and found.anomalies:
            # Completed without its Run evidence: the occurrence stays pending (fail
            # closed) and the anomaly is counted like a job's.
            first = found.anomalies[0]
            anomaly = "completed_without_evidence"
            details = {
                "kind": Kind.SCHEDULE,
                "job_id": first["job_id"],
                "missing_evidence": first["missing_evidence"],
            }
        phase: Phase | None = None
        status: str | None = None
        result: dict[str, Any] | None = None
        fingerprint, read_after = "", None
        if trouble is None and sched.result == "ok":
            followed.schedule = sched.body
            status = text(sched.body, "Status")
            phase = Phase.PENDING
            if (status or "").lower() == "disabled" and not awaiting_work:
                phase = Phase.CANCELLED
                result = {"remote_id": target.remote_id, "reason": "schedule_disabled"}
                result.update(followed.summary())
            fingerprint = followed.fingerprint()
            next_run = as_timestamp(get_ci(followed.schedule, "NextRunAt"))
            if next_run is not None and not followed.pending:
                read_after = next_run  # between occurrences: read just after the next one
        elif found is not None and sched.result == "not_found":
            # Deleted, its work still followed: a change in it restarts the backoff.
            phase = Phase.PENDING
            status = text(followed.schedule, "Status")
            fingerprint = followed.fingerprint()
        return Judgement(
            *polled,
            phase=phase,
            fingerprint=fingerprint,
            remote_status=status,
            remote=followed.remote(),
            result=result,
            anomaly=anomaly,
            anomaly_details=details,
            read_after=read_after,
            occurrences=reported,
            summary=followed.summary(),
            not_found_reason="schedule_deleted",
            awaiting_work=awaiting_work,
            class_work=work,
        )
