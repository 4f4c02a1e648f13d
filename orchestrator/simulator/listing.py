"""The function operations lists (jobs, runs): their filters, order, Limit and Total.

A filtered list reads only the rows its narrowest index series holds for its
time window (see index.py); only an unfiltered one reads every job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.clock import parse_iso
from orchestrator.simulator.enums import SRC_SCHEDULE
from orchestrator.simulator.index import Key
from orchestrator.simulator.model import Job, JobMeta
from orchestrator.simulator.state import SimState


@dataclass(slots=True)
class Filters:
    function_id: str | None = None  # a BusinessFunctionId or a function key
    schedule_id: str | None = None
    binding_id: str | None = None
    action_id: str | None = None
    entity_id: str | None = None
    search: str | None = None  # a case-insensitive part of CorrelationId, FunctionKey or JobId
    source: int | None = None
    status: int | None = None
    start: float | None = None  # From: CreatedAt of a job, StartedAt of a run
    end: float | None = None  # To
    limit: int = 50

    def index_keys(self) -> list[Key]:
        """The index series this request's rows are all in (index.JOB_FIELDS)."""
        wanted = (
            ("function", self.function_id),
            ("schedule", self.schedule_id),
            ("binding", self.binding_id),
            ("action", self.action_id),
            ("entity", self.entity_id),
        )
        return [(name, value) for name, value in wanted if value is not None]

    def meta_matches(self, job: Job) -> bool:
        m = job.meta
        return (
            (
                self.function_id is None
                or self.function_id in (m.business_function_id, m.function_key)
            )
            and (self.schedule_id is None or m.schedule_id == self.schedule_id)
            and (self.binding_id is None or m.trigger_binding_id == self.binding_id)
            and (self.action_id is None or m.action_id == self.action_id)
            and (self.entity_id is None or m.entity_id == self.entity_id)
            and (self.source is None or m.source == self.source)
            and (self.search is None or self._found(m))
        )

    def _found(self, m: JobMeta) -> bool:
        term = (self.search or "").lower()
        texts = (m.correlation_id, m.function_key, m.job_id)
        return any(t is not None and term in t.lower() for t in texts)

    def in_range(self, ts: float) -> bool:
        return (self.start is None or ts >= self.start) and (self.end is None or ts <= self.end)


def job_candidates(st: SimState, f: Filters) -> list[Job]:
    """The jobs a jobs list reads, newest first: every match, and few others."""
    return st.index.jobs(f.index_keys(), f.start, f.end)


def run_candidates(st: SimState, f: Filters) -> tuple[list[Job], list[int]]:
    """The jobs (in the order added) and skipped occurrences (positions) a runs list reads."""
    jobs = st.index.run_jobs(f.index_keys(), f.start, f.end)
    skipped: list[int] = []
    # A skipped occurrence has no binding, action, record or correlation id; its
    # Source is Schedule.
    unkeyed = (f.binding_id, f.action_id, f.entity_id, f.search) == (None, None, None, None)
    if unkeyed and f.source in (None, SRC_SCHEDULE):
        skipped = sorted(st.schedules.skipped_index.select(f.index_keys(), f.start, f.end))
    return jobs, skipped


def list_jobs(st: SimState, f: Filters, now: float) -> tuple[list[dict[str, Any]], int]:
    """The first ``f.limit`` matching job bodies, newest first, and how many matched."""
    items: list[dict[str, Any]] = []
    total = 0
    for job in job_candidates(st, f):
        if not f.meta_matches(job) or not f.in_range(job.meta.created_at):
            continue
        view = job.view(now)
        if view is None or (f.status is not None and view.status != f.status):
            continue
        total += 1
        if len(items) < f.limit:
            items.append(view.body)
    return items, total


def list_runs(st: SimState, f: Filters, now: float) -> tuple[list[dict[str, Any]], int]:
    """The first ``f.limit`` matching run rows, latest StartedAt first, and how many matched."""
    jobs, skipped = run_candidates(st, f)
    # Rows gathered in the order a full scan meets them (jobs as added, then skipped
    # occurrences), so the stable sort breaks StartedAt ties exactly as it always has.
    rows: list[tuple[float, dict[str, Any]]] = []
    for job in jobs:
        if f.meta_matches(job):
            rows.extend((parse_iso(r["StartedAt"]), r) for r in job.runs(now) if r.get("StartedAt"))
    for i in skipped:
        at, row = st.schedules.skipped_runs[i]
        fid = row["BusinessFunctionId"]
        if f.schedule_id in (None, row["ScheduleId"]) and f.function_id in (None, fid):
            rows.append((at, row))
    matched = [
        row
        for at, row in rows
        if f.in_range(at) and (f.status is None or row.get("Status") == f.status)
    ]
    matched.sort(key=lambda r: r["StartedAt"], reverse=True)
    return matched[: f.limit], len(matched)
