"""Work found by filter, judged from what was read of its jobs and runs: pure.

The tracking follows the first ``expect`` jobs the filter matched, oldest
first. Each is judged by the interpreter, as a function job status body whose
``Run`` is the job's latest run from its run history (the outcome comes from
the last run), and has *ended* once it is terminal and its runs were read. A
Completed job without Run evidence is an anomaly: the tracking keeps polling.

What is followed lives in the tracking's ``remote`` (``FoundState.to_json``),
so a restart resumes with the jobs already matched.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from orchestrator.clock import iso
from orchestrator.interpret import EnumMap, Phase, Verdict, interpret
from orchestrator.interpret._read import (
    as_timestamp,
    enum_name,
    get_ci,
    latest_run,
    text,
    whole,
)
from orchestrator.vocabulary import Kind
from orchestrator.workfilter import WorkFilter

Row = Mapping[str, Any]

# What a matched row must show, when it shows the field at all: a list route
# that ignored a declared filter is caught here, not believed.
_ROW_FIELDS = {
    "trigger_binding_id": "TriggerBindingId",
    "entity_id": "EntityId",
    "action_id": "ActionId",
}


@dataclass(slots=True)
class FoundJob:
    job_id: str
    body: Any = None  # the last job body read (a list row until the job itself is read)
    runs: list[dict[str, Any]] | None = None  # its runs, once it is terminal

    def to_json(self) -> dict[str, Any]:
        return {"JobId": self.job_id, "Job": self.body, "Runs": self.runs}

    @classmethod
    def from_json(cls, raw: Any) -> FoundJob | None:
        job_id = text(raw, "JobId")
        if job_id is None:
            return None
        runs = raw.get("Runs")
        kept = [dict(r) for r in runs if isinstance(r, Mapping)] if isinstance(runs, list) else None
        return cls(job_id, raw.get("Job"), kept)


@dataclass(slots=True)
class FoundState:
    work: WorkFilter
    since: float | None  # None: the job_id form (no list is read)
    expect: int
    jobs: list[FoundJob] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "Filter": self.work.to_json(),
            "Since": iso(self.since),
            "ExpectJobs": self.expect,
            "Jobs": [j.to_json() for j in self.jobs],
        }

    @classmethod
    def from_json(cls, raw: Any, key: str, default_since: float) -> FoundState | None:
        remote = raw if isinstance(raw, Mapping) else {}
        work = WorkFilter.from_json(remote.get("Filter")) or WorkFilter.from_key(key)
        if work is None:
            return None
        since = as_timestamp(remote.get("Since"))
        if since is None and work.job_id is None:
            since = as_timestamp(work.since) if work.since is not None else default_since
        expect = max(whole(remote.get("ExpectJobs")) or 1, 1)
        listed = remote.get("Jobs")
        jobs = [j for j in map(FoundJob.from_json, listed or ()) if j is not None]
        if work.job_id is not None:
            jobs = jobs[:1] or [FoundJob(work.job_id)]
            expect = 1
        return cls(work, since, expect, jobs)

    @property
    def listing(self) -> bool:
        """More jobs are still to be found by the list route."""
        return self.work.job_id is None and len(self.jobs) < self.expect


def list_filters(state: FoundState) -> dict[str, str]:
    """The jobs route's query for this work, by our filter names."""
    w = state.work
    wanted = {
        "trigger_binding_id": w.trigger_binding_id,
        "entity_id": w.entity_id,
        "search": w.filter_correlation_id,
        "action_id": w.action_id,
        "from": iso(state.since),
    }
    return {k: v for k, v in wanted.items() if v is not None}


def matches(state: FoundState, row: Row) -> tuple[bool, str | None]:
    """(does the row match, the field a list route wrongly let through or None)."""
    w = state.work
    for name, wire in _ROW_FIELDS.items():
        wanted, shown = getattr(w, name), text(row, wire)
        if wanted is not None and shown is not None and shown != wanted:
            return False, wire
    created = as_timestamp(get_ci(row, "CreatedAt"))
    if state.since is not None and created is not None and created < state.since - 0.001:
        return False, "CreatedAt"
    shown = text(row, "CorrelationId")
    if w.filter_correlation_id is not None and shown is not None:
        # A search matches more than the correlation id: not a broken filter.
        return shown == w.filter_correlation_id, None
    return True, None


def adopt_rows(state: FoundState, rows: Sequence[Row]) -> list[str]:
    """Follow the oldest new matches, up to ``expect``; the fields found ignored."""
    known = {j.job_id for j in state.jobs}
    fresh: list[tuple[float, str, Row]] = []
    ignored: list[str] = []
    for row in rows:
        job_id = text(row, "JobId")
        if job_id is None or job_id in known:
            continue
        ok, wrong = matches(state, row)
        if wrong is not None:
            ignored.append(wrong)
        if ok:
            known.add(job_id)
            fresh.append((as_timestamp(get_ci(row, "CreatedAt")) or 0.0, job_id, row))
    fresh.sort(key=lambda item: (item[0], item[1]))
    for _, job_id, row in fresh[: state.expect - len(state.jobs)]:
        state.jobs.append(FoundJob(job_id, dict(row)))
    return ignored


def verdict(job: FoundJob, enums: EnumMap) -> Verdict:
    """The job judged as a status body, its Run the last of its runs when they were read."""
    body = job.body
    if body is None:
        return Verdict(Phase.PENDING)  # named by the caller, not read yet
    if isinstance(body, Mapping) and job.runs:
        body = {**body, "Run": latest_run(job.runs)}
    return interpret(Kind.FUNCTION_JOB, body, enums)


def ended(job: FoundJob, v: Verdict) -> bool:
    return v.terminal and job.runs is not None


def text_status(job: FoundJob, enums: EnumMap) -> str | None:
    """The job's Status by name, as its body shows it."""
    return enum_name(get_ci(job.body, "Status"), enums.values.get("status", {}))


def job_result(job: FoundJob, v: Verdict, run_status: Mapping[int, str]) -> dict[str, Any]:
    """One entry of ``result.jobs`` (CONTRACT section 8)."""
    body = job.body if isinstance(job.body, Mapping) else {}
    run = latest_run(job.runs or [], body)
    attempts = whole(get_ci(body, "CurrentAttempt"))
    if job.runs:
        attempts = max(len(job.runs), attempts or 0)
    return {
        "job_id": job.job_id,
        "status": v.remote_status,
        "attempts": attempts,
        "run_id": text(run, "RunId"),
        "run_status": enum_name(get_ci(run, "Status"), run_status),
        "result_summary": text(run, "ResultSummary"),
        "result_data": get_ci(run, "ResultData"),
        "last_error": text(body, "LastError"),
        "error_summary": text(run, "ErrorSummary"),
        "created_at": text(body, "CreatedAt"),
        "completed_at": text(run, "CompletedAt"),
    }


@dataclass(slots=True)
class Judged:
    """The whole tracking judged: its phase and what the resource and result show."""

    phase: Phase
    remote_status: str | None
    fingerprint: str
    summary: dict[str, Any]
    anomaly: str | None = None
    anomaly_details: Mapping[str, Any] | None = None
    next_run_at: float | None = None
    invalid: str | None = None  # a job body that is no status body at all


def judge_all(state: FoundState, enums: EnumMap) -> Judged:
    run_status = enums.values.get("run.status", {})
    verdicts = [(job, verdict(job, enums)) for job in state.jobs]
    results = [job_result(job, v, run_status) for job, v in verdicts]
    summary = {
        "remote_id": state.jobs[0].job_id if state.jobs else None,
        "jobs": results,
        "seen": {"matched": len(state.jobs), "expected": state.expect},
        "since": iso(state.since),
        "detail": _detail(state, verdicts),
    }
    parts = [(r["job_id"], r["status"], r["run_id"], r["run_status"], j.runs is None)
             for r, (j, _) in zip(results, verdicts, strict=True)]  # fmt: skip
    fingerprint = hashlib.blake2b(orjson.dumps(parts), digest_size=8).hexdigest()
    waiting = [(j, v) for j, v in verdicts if not ended(j, v)]
    status = waiting[0][1].remote_status if waiting else None
    if not waiting and results:
        status = results[-1]["status"]
    out = Judged(Phase.PENDING, status, fingerprint, summary)
    for job, v in verdicts:
        if v.phase is Phase.INVALID:
            out.invalid = f"job {job.job_id}: not a status body ({v.anomaly})"
        elif v.phase is Phase.ANOMALY and out.anomaly is None:
            out.anomaly, out.anomaly_details = v.anomaly, {**v.details, "job_id": job.job_id}
    if out.invalid is not None or out.anomaly is not None:
        out.phase = Phase.ANOMALY if out.invalid is None else Phase.INVALID
        return out
    if not state.listing and not waiting:
        phases = {v.phase for _, v in verdicts}
        out.phase = (
            Phase.SUCCEEDED
            if phases == {Phase.SUCCEEDED}
            else Phase.FAILED
            if Phase.FAILED in phases
            else Phase.CANCELLED
        )
    elif not state.listing:
        pending = [v.next_run_at for _, v in waiting]
        if all(t is not None for t in pending):
            out.next_run_at = min(t for t in pending if t is not None)
    return out


def _detail(state: FoundState, verdicts: list[tuple[FoundJob, Verdict]]) -> str:
    """What the tracking waits for, in a line (told apart on a deadline)."""
    still = [f"job {j.job_id} still {v.remote_status or 'unread'}" for j, v in verdicts
             if not v.terminal]  # fmt: skip
    unread = [f"job {j.job_id} {v.remote_status}, its runs not read yet" for j, v in verdicts
              if v.terminal and j.runs is None]  # fmt: skip
    parts = still + unread
    if state.listing:
        since = iso(state.since)
        if not state.jobs:
            parts.append(f"no matching job seen since {since}")
        else:
            parts.append(f"{len(state.jobs)} of {state.expect} expected jobs seen since {since}")
    return "; ".join(parts) if parts else "every matched job has ended"
