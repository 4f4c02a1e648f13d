"""Function schedules: a due CRON occurrence enqueues a job unless the target is busy.

The platform skips an occurrence (a Skipped run, no job) while the target
function already has queued or running work, whatever started that work: an
earlier occurrence, an API enqueue, another schedule.

Evaluated lazily: a request that arrives after the earliest due occurrence
replays every occurrence since, each at its own instant. Because job lifecycles
are pure functions of time, the overlap check at an occurrence's instant gives
the same answer it would have given in real time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orchestrator.clock import iso
from orchestrator.simulator.cron import Cron
from orchestrator.simulator.enums import JOB_STATUS, LEASED, QUEUED, RUN_SKIPPED, SRC_SCHEDULE
from orchestrator.simulator.index import TimeIndex, skipped_keys
from orchestrator.simulator.model import Job

_MAX_CATCH_UP = 10_000  # occurrences replayed per evaluation; older ones are dropped


@dataclass(slots=True)
class Schedule:
    schedule_id: str
    business_function_id: str
    function_key: str
    cron: Cron
    time_zone: str
    enabled: bool
    valid_target: bool
    next_at: float | None = None
    last_job_id: str | None = None
    last_skipped: bool = False

    def plan(self, after: float) -> None:
        live = self.enabled and self.valid_target
        self.next_at = self.cron.next_after(after, self.time_zone) if live else None


class ScheduleBook:
    def __init__(
        self,
        enqueue: Callable[[Schedule, float], Job],
        find_job: Callable[[str], Job | None],
        new_id: Callable[[str], str],
        busy: Callable[[str, float], Job | None],
    ) -> None:
        self._enqueue = enqueue
        self._find_job = find_job
        self._busy = busy  # a queued or leased job of a function at an instant
        self._new_id = new_id
        self.schedules: dict[str, Schedule] = {}
        self.skipped_runs: list[tuple[float, dict[str, Any]]] = []
        self.skipped_index: TimeIndex[int] = TimeIndex()  # positions in skipped_runs
        self.next_due = math.inf

    def clear(self) -> None:
        self.schedules.clear()
        self.skipped_runs.clear()
        self.skipped_index.clear()

    def add(self, schedule: Schedule, now: float) -> None:
        schedule.plan(now)  # only future occurrences: creating a schedule runs nothing
        self.schedules[schedule.schedule_id] = schedule
        self._refresh_due()

    def update(self, schedule: Schedule, now: float) -> None:
        schedule.plan(now)
        self._refresh_due()

    def remove(self, schedule_id: str) -> Schedule | None:
        gone = self.schedules.pop(schedule_id, None)
        self._refresh_due()
        return gone

    def _refresh_due(self) -> None:
        dues = [s.next_at for s in self.schedules.values() if s.next_at is not None]
        self.next_due = min(dues, default=math.inf)

    def _active_job(self, schedule: Schedule, at: float) -> Job | None:
        if schedule.last_job_id is None:
            return None
        job = self._find_job(schedule.last_job_id)
        view = job.view(at) if job is not None else None
        return job if view is not None and view.status in (QUEUED, LEASED) else None

    def evaluate(self, now: float) -> None:
        """Fire every occurrence due by ``now``, in time order across schedules."""
        for _ in range(_MAX_CATCH_UP):
            due = [s for s in self.schedules.values() if s.next_at is not None and s.next_at <= now]
            if not due:
                break
            schedule = min(due, key=lambda s: s.next_at or 0.0)
            at = schedule.next_at or now
            self._fire(schedule, at)
            schedule.plan(at)
        else:
            for schedule in self.schedules.values():
                schedule.plan(now)
        self._refresh_due()

    def _fire(self, schedule: Schedule, at: float) -> None:
        active = self._busy(schedule.business_function_id, at)
        if active is None:
            job = self._enqueue(schedule, at)
            schedule.last_job_id, schedule.last_skipped = job.meta.job_id, False
            return
        schedule.last_skipped = True
        self.skipped_index.add(
            skipped_keys(schedule.business_function_id, schedule.schedule_id),
            at,
            len(self.skipped_runs),
        )
        self.skipped_runs.append(
            (
                at,
                {
                    "RunId": self._new_id("run"),
                    "JobId": None,
                    "BusinessFunctionId": schedule.business_function_id,
                    "Source": SRC_SCHEDULE,
                    "ScheduleId": schedule.schedule_id,
                    "TriggerBindingId": None,
                    "Attempt": 0,
                    "Status": RUN_SKIPPED,
                    "StartedAt": iso(at),
                    "CompletedAt": iso(at),
                    "DurationMs": 0,
                    "ResultSummary": "Skipped: the target function has queued or running work",
                    "ResultData": {"ActiveJobId": active.meta.job_id},
                    "ErrorSummary": None,
                },
            )
        )

    def body(self, schedule: Schedule, now: float) -> dict[str, Any]:
        active = self._active_job(schedule, now)
        last = self._find_job(schedule.last_job_id) if schedule.last_job_id else None
        last_view = last.view(now) if last is not None else None
        if schedule.last_skipped:
            last_status: str | None = "Skipped"
        elif last_view is not None:
            last_status = JOB_STATUS.name(last_view.status)
        else:
            last_status = None
        active_view = active.view(now) if active is not None else None
        return {
            "ScheduleId": schedule.schedule_id,
            "BusinessFunctionId": schedule.business_function_id,
            "FunctionKey": schedule.function_key,
            "Cron": schedule.cron.expression,
            "TimeZone": schedule.time_zone,
            "Status": "Enabled" if schedule.enabled else "Disabled",
            "NextRunAt": iso(schedule.next_at),
            "LastStatus": last_status,
            "TargetHealth": "Healthy" if schedule.valid_target else "InvalidTarget",
            "ActiveJobId": active.meta.job_id if active is not None else None,
            "ActiveJobRetryStopState": (
                active_view.body.get("RetryStopState") if active_view is not None else None
            ),
        }
