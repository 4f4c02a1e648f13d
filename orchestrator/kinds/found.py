"""Kinds ``trigger_work`` and ``action_work``: work found by filter (CONTRACT section 8).

One poll, while fewer than ``expect_jobs`` jobs have matched, lists Function
operations jobs by the tracking's filter from its ``since`` on; then reads
each matched job that has not ended through the operations route
(``GET .../function-operations/jobs/{jobId}``: the runtime job route is kept
for API-enqueued jobs), and, once a job is terminal, its runs, whose last one
gives the job's outcome. The tracking ends when every expected job has ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from orchestrator.interpret import TERMINAL_PHASES
from orchestrator.interpret._read import TERMINAL_JOB, get_ci, text
from orchestrator.kinds.base import (
    Adopted,
    JsonObject,
    Judgement,
    KindHandler,
    PollTarget,
    poll_reads,
)
from orchestrator.platform.found_jobs import (
    FoundJob,
    FoundState,
    adopt_rows,
    ended,
    judge_all,
    list_filters,
    text_status,
    verdict,
)
from orchestrator.platform.run_history import read_rows
from orchestrator.vocabulary import KINDS, Kind
from orchestrator.workspace.readresult import ReadResult, invalid

if TYPE_CHECKING:
    from orchestrator.store.base import Tracking
    from orchestrator.workspace.client import WorkspaceClient

# An answer the list route gave that a declared filter should have kept out.
FILTER_IGNORED = "list_filter_ignored"


class _FoundReads(NamedTuple):
    state: FoundState | None
    reads: list[ReadResult]
    trouble: ReadResult | None
    ignored: list[str]


class FoundHandler(KindHandler):
    def __init__(self, kind: str, skew_s: float) -> None:
        self.kind = kind
        self._enums = KINDS[Kind(kind)].enums or Kind.FUNCTION_JOB  # its jobs' enums
        self._skew_s = skew_s  # polling.filter_skew_s, for a row stored without its since

    def adopt(self, t: Tracking, client: WorkspaceClient) -> Adopted:
        # None when the stored filter cannot be read: every read then says so.
        since = t.created_at - self._skew_s
        return Adopted(state=FoundState.from_json(t.remote, t.remote_id, since))

    async def poll(self, target: PollTarget, client: WorkspaceClient) -> Judgement:
        return self._judge(client, await self._read(target, client))

    async def _read(self, target: PollTarget, client: WorkspaceClient) -> _FoundReads:
        state = target.kind_state if isinstance(target.kind_state, FoundState) else None
        reads: list[ReadResult] = []
        if state is None:
            unreadable = invalid(ReadResult("ok"), "the stored filter cannot be read")
            return _FoundReads(None, reads, unreadable, [])
        ignored: list[str] = []
        if state.listing:
            rows, listed = await read_rows(
                client, "function_jobs", list_filters(state), "JobId", "CreatedAt"
            )
            reads.append(listed)
            if rows is None:
                return _FoundReads(state, reads, listed, ignored)
            ignored = adopt_rows(state, rows)
        enums = client.enums[self._enums]
        for job in state.jobs:
            if ended(job, verdict(job, enums)):
                continue  # its outcome is known: never read again
            # Until it has ended, the job and (once its status is terminal) its runs
            # are read afresh: a Completed job without Run evidence is read again.
            job.runs = None
            trouble = await self._read_job(client, job, reads)
            if trouble is None and text_status(job, enums) in TERMINAL_JOB:
                trouble = await self._read_runs(client, job, reads)
            if trouble is not None:
                return _FoundReads(state, reads, trouble, ignored)
        return _FoundReads(state, reads, None, ignored)

    @staticmethod
    async def _read_job(
        client: WorkspaceClient, job: FoundJob, reads: list[ReadResult]
    ) -> ReadResult | None:
        path = client.cfg.paths.operations_job.replace("{id}", job.job_id)
        read = await client.call("GET", path)
        reads.append(read)
        if read.result != "ok":
            return read
        body = read.body
        if isinstance(body, Mapping) and get_ci(body, "JobId") is None:
            body = get_ci(body, "Data")  # an envelope, as on enqueue
        if not isinstance(body, Mapping):
            return invalid(read, f"{path}: not a job body")
        job.body = dict(body)
        return None

    @staticmethod
    async def _read_runs(
        client: WorkspaceClient, job: FoundJob, reads: list[ReadResult]
    ) -> ReadResult | None:
        function_id = text(job.body, "BusinessFunctionId") or text(job.body, "FunctionKey")
        created = text(job.body, "CreatedAt")
        if function_id is None or created is None:
            job.runs = []  # nothing to filter the runs by: the job's own Run stands
            return None
        query = {"function_id": function_id, "from": created}
        rows, read = await read_rows(client, "function_runs", query, "RunId", "StartedAt")
        reads.append(read)
        if rows is None:
            return read
        job.runs = [dict(r) for r in rows if text(r, "JobId") == job.job_id]
        return None

    def _judge(self, client: WorkspaceClient, found: _FoundReads) -> Judgement:
        state, trouble = found.state, found.trouble
        polled = poll_reads("ok", found.reads, trouble)
        if state is None:
            return Judgement(*polled, not_found_reason="job_not_found")
        judged = judge_all(state, client.enums[self._enums])
        details: Mapping[str, object] | None = None
        anomaly: str | None = None
        if found.ignored:
            anomaly, details = FILTER_IGNORED, {"fields": sorted(set(found.ignored))}
        if trouble is None and judged.invalid is not None:
            error: JsonObject = {"kind": "invalid_response", "message": judged.invalid}
            polled = polled._replace(label="invalid_response", error=error)
        if trouble is not None or judged.invalid is not None:
            return Judgement(
                *polled, anomaly=anomaly, anomaly_details=details, remote=state.to_json(),
                summary=judged.summary, not_found_reason="job_not_found",
            )  # fmt: skip
        if judged.anomaly is not None:
            anomaly, details = judged.anomaly, judged.anomaly_details
        return Judgement(
            *polled,
            phase=judged.phase,
            fingerprint=judged.fingerprint,
            remote_status=judged.remote_status,
            remote=state.to_json(),
            result=dict(judged.summary) if judged.phase in TERMINAL_PHASES else None,
            anomaly=anomaly,
            anomaly_details=details,
            next_run_at=judged.next_run_at,
            summary=judged.summary,
            not_found_reason="job_not_found",
        )
