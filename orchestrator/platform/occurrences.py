"""A schedule's occurrences, from its function-operations jobs and runs: pure.

An occurrence is one due CRON instant. It either enqueued a job (``Source =
Schedule``) or, because the previous job was still Queued or Leased, left a
Skipped run with no job. It is *finished* when:

- its job is Completed and its latest run is durably Success or Skipped with
  CompletedAt, DurationMs and a non-empty ResultSummary (the evidence a job
  status read needs, ``interpret.missing_evidence``); without it the
  occurrence stays pending, named in ``Scan.anomalies`` (fail closed);
- its job is Failed or Cancelled and its latest run, if it has one, is no
  longer Running;
- it is a Skipped run (no job).

The schedule's ``LastStatus`` plays no part: it is a summary, not evidence.

Each job occurrence's function and times, as its own row shows them, come
with the scan (``Scan.times``): adaptive polling learns how long the function
takes from the occurrences that end, as from function jobs.

What has been reported is kept in ``FollowState``, stored with the tracking, so
that a restart reports nothing twice: ``since`` is the ``From`` of the next
query and ``reported`` holds the keys of finished occurrences at or after it.
``since`` only moves forward, and never past an unfinished occurrence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.clock import iso
from orchestrator.interpret import missing_evidence
from orchestrator.interpret._read import (
    TERMINAL_JOB,
    as_timestamp,
    enum_name,
    get_ci,
    latest_run,
    run_fields,
    text,
    whole,
)

Row = Mapping[str, Any]

# Occurrences may become visible slightly out of order (commit lag on the
# workspace): the watermark trails the newest one seen by this much.
LAG_MARGIN_S = 120.0


@dataclass(slots=True)
class FollowState:
    since: float
    reported: dict[str, float] = field(default_factory=dict)
    count: int = 0
    last: dict[str, Any] | None = None
    # The schedule was seen disabled or deleted: from then on the tracking only
    # waits for the work it had already created, ``awaiting`` the job the
    # schedule named active then, until that job is reported.
    stopped: bool = False
    awaiting: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "since": iso(self.since),
            "reported": dict(self.reported),
            "count": self.count,
            "last": self.last,
            "stopped": self.stopped,
            "awaiting": self.awaiting,
        }

    @classmethod
    def from_json(cls, raw: Any, default_since: float) -> FollowState:
        """The stored state; a missing or unreadable one starts at ``default_since``."""
        if not isinstance(raw, Mapping):
            return cls(default_since)
        since = as_timestamp(raw.get("since"))
        reported = raw.get("reported")
        last = raw.get("last")
        return cls(
            since=since if since is not None else default_since,
            reported={
                str(k): float(v)
                for k, v in (reported.items() if isinstance(reported, Mapping) else ())
                if isinstance(v, int | float) and not isinstance(v, bool)
            },
            count=whole(raw.get("count")) or 0,
            last=dict(last) if isinstance(last, Mapping) else None,
            stopped=raw.get("stopped") is True,
            awaiting=text(raw, "awaiting"),
        )


@dataclass(frozen=True, slots=True)
class JobTimes:
    """A job occurrence's FunctionKey and its own times (None where its rows omit them)."""

    function_key: str | None
    created_at: float | None
    ended_at: float | None  # its latest run's CompletedAt, else the job's; None unfinished


@dataclass(frozen=True, slots=True)
class Scan:
    finished: list[dict[str, Any]]  # not yet reported, oldest first
    pending: list[dict[str, Any]]  # jobs not finished yet, oldest first
    newest: float | None  # the time of the newest occurrence seen
    # pending jobs that say Completed without their Run evidence (a contract anomaly)
    anomalies: list[dict[str, Any]] = field(default_factory=list)
    # every job occurrence seen, by its key
    times: dict[str, JobTimes] = field(default_factory=dict)


def scan(
    state: FollowState,
    jobs: Sequence[Row],
    runs: Sequence[Row],
    job_status: Mapping[int, str],
    run_status: Mapping[int, str],
) -> Scan:
    """Finished occurrences not yet reported, and the jobs still in progress."""
    runs_by_job: dict[str, list[Row]] = {}
    skipped: list[Row] = []
    for run in runs:
        job_id = text(run, "JobId")
        if job_id is not None:
            runs_by_job.setdefault(job_id, []).append(run)
        elif enum_name(get_ci(run, "Status"), run_status) == "Skipped":
            skipped.append(run)
    seen: set[str] = set()
    times: dict[str, JobTimes] = {}
    found: list[tuple[float, dict[str, Any]]] = []
    for job in jobs:
        job_id = text(job, "JobId")
        if job_id is None or job_id in seen:
            continue
        seen.add(job_id)
        at = as_timestamp(get_ci(job, "CreatedAt"))
        occ = _job_occurrence(job, job_id, runs_by_job.get(job_id, []), job_status, run_status)
        times[occ["key"]] = _times(job, occ)
        found.append((state.since if at is None else at, occ))
    for run in skipped:
        run_id = text(run, "RunId")
        if run_id is None or f"run:{run_id}" in seen:
            continue
        seen.add(f"run:{run_id}")
        at = as_timestamp(get_ci(run, "StartedAt")) or as_timestamp(get_ci(run, "CompletedAt"))
        found.append((state.since if at is None else at, _skipped_occurrence(run, run_id)))
    found.sort(key=lambda pair: (pair[0], pair[1]["key"]))
    for at, occ in found:
        occ["at"] = at
    finished = [o for _, o in found if o["finished"] and o["key"] not in state.reported]
    waiting = [o for _, o in found if not o["finished"]]
    anomalies = [o for o in waiting if o.get("missing_evidence")]
    newest = max((at for at, _ in found), default=None)
    return Scan(finished, waiting, newest, anomalies, times)


def _times(job: Row, occurrence: Mapping[str, Any]) -> JobTimes:
    ended = None
    if occurrence["finished"]:
        ended = (
            as_timestamp(occurrence["completed_at"])
            or as_timestamp(get_ci(job, "CompletedAt"))
            or as_timestamp(get_ci(job, "ModifiedAt"))
        )
    return JobTimes(text(job, "FunctionKey"), as_timestamp(get_ci(job, "CreatedAt")), ended)


def mark(state: FollowState, occurrence: dict[str, Any]) -> None:
    """Record one occurrence as reported (before its event is written with this state)."""
    state.reported[occurrence["key"]] = float(occurrence["at"])
    state.count += 1
    state.last = public(occurrence)
    if occurrence.get("job_id") is not None and occurrence["job_id"] == state.awaiting:
        state.awaiting = None


def settle(state: FollowState, result: Scan) -> None:
    """Move the watermark forward and forget keys older than it."""
    candidate = state.since
    if result.newest is not None:
        candidate = max(candidate, result.newest - LAG_MARGIN_S)
    if result.pending:
        candidate = min(candidate, min(float(o["at"]) for o in result.pending))
    state.since = max(state.since, candidate)
    # The next query asks From the watermark in milliseconds, truncated: an
    # occurrence inside that millisecond but before the watermark itself is
    # still returned, and its key must still say it was reported (dropping it
    # reported a job created in the millisecond a tracking began once per read).
    asked_from = as_timestamp(iso(state.since))
    floor = state.since if asked_from is None else min(state.since, asked_from)
    state.reported = {k: at for k, at in state.reported.items() if at >= floor}


def public(occurrence: Mapping[str, Any]) -> dict[str, Any]:
    """The occurrence as events and results carry it."""
    out = {k: v for k, v in occurrence.items() if k not in ("finished", "at")}
    out["occurred_at"] = iso(occurrence.get("at"))
    return out


def _job_occurrence(
    job: Row,
    job_id: str,
    runs: list[Row],
    job_status: Mapping[int, str],
    run_status: Mapping[int, str],
) -> dict[str, Any]:
    status = enum_name(get_ci(job, "Status"), job_status)
    run = latest_run(runs, job)
    summary = run_fields(run, run_status)
    finished = False
    missing: list[str] = []
    if status == "Completed":
        missing = missing_evidence(run, summary["run_status"])
        finished = not missing
    elif status in TERMINAL_JOB:
        finished = run is None or (
            summary["run_status"] is not None and summary["run_status"] != "Running"
        )
    occurrence = {
        "key": f"job:{job_id}",
        "skipped": False,
        "job_id": job_id,
        "job_status": status,
        **summary,
        "attempts": len(runs),
        "last_error": text(job, "LastError"),
        "cancellation_reason_code": text(job, "CancellationReasonCode"),
        "active_job_id": None,
        "finished": finished,
    }
    if missing:
        occurrence["missing_evidence"] = missing
    return occurrence


def _skipped_occurrence(run: Row, run_id: str) -> dict[str, Any]:
    data = get_ci(run, "ResultData")
    return {
        "key": f"run:{run_id}",
        "skipped": True,
        "job_id": None,
        "job_status": None,
        **run_fields(run, {}),
        "run_status": "Skipped",
        "attempts": 0,
        "last_error": None,
        "cancellation_reason_code": None,
        "active_job_id": text(data, "ActiveJobId"),
        "finished": True,
    }
