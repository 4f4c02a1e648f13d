"""A generated function job: its whole attempt plan is drawn at enqueue, read lazily by time.

Nothing runs in the background. The job stores when each attempt is leased and
ends and how it ends; a status read finds the phase for "now" among a handful
of attempts. Cancel and stop-retries edit the plan.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from orchestrator.clock import iso
from orchestrator.simulator.enums import (
    CANCELLED,
    COMPLETED,
    FAILED,
    LEASED,
    QUEUED,
    RUN_CANCELLED,
    RUN_FAILED,
    RUN_RUNNING,
    RUN_SKIPPED,
    RUN_SUCCESS,
    RUN_TIMED_OUT,
)
from orchestrator.simulator.model import STOP_REASON, JobMeta, StopResult, View, same_instant
from orchestrator.simulator.profiles import JobBehaviour

_RUN_STATUS = {
    "success": RUN_SUCCESS,
    "skipped": RUN_SKIPPED,
    "failed": RUN_FAILED,
    "timed_out": RUN_TIMED_OUT,
    "hang": RUN_RUNNING,
}
_SUCCESSFUL = ("success", "skipped")


@dataclass(slots=True)
class Attempt:
    number: int
    ready_at: float  # queued (for a retry: NextRunAt)
    lease_at: float
    end_at: float  # math.inf for a hung attempt
    outcome: str
    run_id: str


@dataclass(slots=True)
class Final:
    """A terminal state imposed by a command (cancel, stop-retries) at ``at``."""

    at: float
    reason: str | None
    run_status: int | None = None  # overrides the last run's status (an expired lease)


def plan_attempts(
    rng: random.Random, behaviour: JobBehaviour, created_at: float, new_id: Any
) -> list[Attempt]:
    attempts: list[Attempt] = []
    ready = created_at
    for number in range(1, behaviour.max_attempts + 1):
        # At least a millisecond queued: the enqueue response always shows Queued.
        lease = ready + max(behaviour.pickup_s.draw(rng), 0.001)
        outcome = behaviour.outcome(rng, number)
        end = math.inf if outcome == "hang" else lease + behaviour.duration_s.draw(rng)
        attempts.append(Attempt(number, ready, lease, end, outcome, new_id("run")))
        if outcome not in ("failed", "timed_out"):
            break
        ready = end + behaviour.retry_delay_s
    return attempts


def _error_text(meta: JobMeta, outcome: str, runtime_timeout_s: int | None) -> str:
    if outcome == "timed_out":
        if meta.timeout_seconds is None:  # the runtime's Job default applies
            return f"The attempt exceeded the runtime default timeout ({runtime_timeout_s} s)."
        return f"The attempt exceeded TimeoutSeconds ({meta.timeout_seconds})."
    return "Upstream ledger API answered 502 Bad Gateway."


class GeneratedJob:
    def __init__(
        self,
        meta: JobMeta,
        attempts: list[Attempt],
        lease_timeout_s: float,
        runtime_timeout_s: int | None = None,
    ) -> None:
        self.meta = meta
        self.runtime_timeout_s = runtime_timeout_s
        self.attempts = attempts
        self.lease_timeout_s = lease_timeout_s
        self.final: Final | None = None
        self.stop_requested_at: float | None = None
        self.cache: tuple[int, float, bytes] | None = None

    # -- reading -------------------------------------------------------------

    def _run(self, a: Attempt, now: float, override: Final | None = None) -> dict[str, Any]:
        done = now >= a.end_at
        status = _RUN_STATUS[a.outcome] if done else RUN_RUNNING
        end = a.end_at
        if override is not None and override.run_status is not None:
            status, end, done = override.run_status, override.at, True
        ok = status in (RUN_SUCCESS, RUN_SKIPPED)
        processed = int(a.run_id[-4:], 16) % 500
        summary = f"Processed {processed} records" if status == RUN_SUCCESS else "Nothing to do"
        return {
            "RunId": a.run_id,
            "JobId": self.meta.job_id,
            "Attempt": a.number,
            "Status": status,
            "StartedAt": iso(a.lease_at),
            "CompletedAt": iso(end) if done else None,
            "DurationMs": round((end - a.lease_at) * 1000) if done else None,
            "ResultSummary": summary if ok else None,
            "ResultData": {"processed": processed} if status == RUN_SUCCESS else None,
            "ErrorSummary": None
            if ok or not done
            else _error_text(self.meta, a.outcome, self.runtime_timeout_s),
        }

    def _current(self, now: float) -> int:
        for i in range(len(self.attempts) - 1, -1, -1):
            if self.attempts[i].lease_at <= now:
                return i
        return -1

    def _last_error(self, upto: int, now: float) -> str | None:
        for a in reversed(self.attempts[: upto + 1]):
            if now >= a.end_at and a.outcome not in _SUCCESSFUL:
                return _error_text(self.meta, a.outcome, self.runtime_timeout_s)
        return None

    def view(self, now: float) -> View:
        final = self.final
        if final is not None and now >= final.at:
            return self._final_view(final, now)
        i = self._current(now)
        stopping = self.stop_requested_at is not None
        reason_codes: list[str] = [STOP_REASON] if stopping else []
        run: dict[str, Any] | None = None
        next_run_at: float | None = None
        will_retry = False
        current = 0
        until = final.at if final is not None else math.inf
        if i < 0:
            status, modified = QUEUED, self.meta.created_at
            if self.attempts:
                until = min(until, self.attempts[0].lease_at)
        else:
            a = self.attempts[i]
            current = a.number
            run = self._run(a, now)
            if now < a.end_at:
                status, modified = LEASED, a.lease_at
                expiry = a.lease_at + self.lease_timeout_s
                if a.outcome == "hang" and now >= expiry:
                    reason_codes.append("job.lease.expired")
                else:
                    until = min(until, a.end_at, expiry if a.outcome == "hang" else math.inf)
            elif a.outcome in _SUCCESSFUL:
                status, modified = COMPLETED, a.end_at
            elif i + 1 < len(self.attempts):
                status, modified, will_retry = QUEUED, a.end_at, True
                next_run_at = self.attempts[i + 1].ready_at
                until = min(until, self.attempts[i + 1].lease_at)
            else:
                status, modified = (CANCELLED if stopping else FAILED), a.end_at
                if not stopping and current >= self.meta.max_attempts:
                    reason_codes.append("job.attempts.exhausted")
        if stopping and self.stop_requested_at is not None:
            modified = max(modified, self.stop_requested_at)
        terminal = status in (COMPLETED, FAILED, CANCELLED)
        body = self.meta.base_body()
        body.update(
            Status=status,
            CanCancel=status == QUEUED,
            CurrentAttempt=current,
            RemainingAttempts=0 if stopping else max(self.meta.max_attempts - current, 0),
            NextRunAt=iso(next_run_at),
            WillRetry=will_retry,
            CanStopRetries=not terminal and not stopping,
            RetryStopState=("Stopped" if terminal else "Requested") if stopping else "None",
            CancellationReasonCode=STOP_REASON if stopping else None,
            ReasonCodes=reason_codes,
            ModifiedAt=iso(modified),
            LastError=self._last_error(i, now),
            Run=run,
        )
        return View(body, status, modified, until, can_cancel=status == QUEUED)

    def _final_view(self, final: Final, now: float) -> View:
        i = self._current(final.at)
        run = self._run(self.attempts[i], now, final) if i >= 0 else None
        current = self.attempts[i].number if i >= 0 else 0
        stop = final.reason == STOP_REASON
        body = self.meta.base_body()
        body.update(
            Status=CANCELLED,
            CanCancel=False,
            CurrentAttempt=current,
            RemainingAttempts=0 if stop else max(self.meta.max_attempts - current, 0),
            NextRunAt=None,
            WillRetry=False,
            CanStopRetries=False,
            RetryStopState="Stopped" if stop else "None",
            CancellationReasonCode=final.reason,
            ReasonCodes=[final.reason] if final.reason else [],
            ModifiedAt=iso(final.at),
            LastError=self._last_error(i, now),
            Run=run,
        )
        return View(body, CANCELLED, final.at)

    def runs(self, now: float) -> list[dict[str, Any]]:
        final = self.final if self.final is not None and now >= self.final.at else None
        horizon = final.at if final is not None else now
        started = [a for a in self.attempts if a.lease_at <= horizon]
        rows = []
        for n, a in enumerate(started):
            row = self._run(a, now, final if n == len(started) - 1 else None)
            row.update(self.meta.run_extras())
            rows.append(row)
        return rows

    def run_starts(self) -> list[float] | None:
        return [a.lease_at for a in self.attempts]

    # -- commands ------------------------------------------------------------

    def cancel(self, now: float) -> tuple[bool, View]:
        before = self.view(now)
        if not before.can_cancel:
            return False, before
        self._finalize(now, None)
        return True, self.view(now)

    def _finalize(self, now: float, reason: str | None, run_status: int | None = None) -> None:
        self.attempts = [a for a in self.attempts if a.lease_at <= now]
        self.final = Final(now, reason, run_status)
        self.cache = None

    def stop_retries(self, now: float, expected_modified_at: float) -> StopResult:
        before = self.view(now)
        if self.stop_requested_at is not None or (
            self.final is not None and self.final.reason == STOP_REASON
        ):
            return StopResult(200, before)  # already accepted: idempotent
        if before.status in (COMPLETED, FAILED, CANCELLED):
            return StopResult(409, before, "The job is already terminal.")
        if not same_instant(expected_modified_at, before.modified_at):
            return StopResult(409, before, "ExpectedModifiedAt is stale: the job has changed.")
        i = self._current(now)
        if before.status == QUEUED:
            self._finalize(now, STOP_REASON)
        elif "job.lease.expired" in before.body["ReasonCodes"]:
            self._finalize(now, STOP_REASON, RUN_CANCELLED)
        else:
            a = self.attempts[i]
            self.attempts = self.attempts[: i + 1]
            self.stop_requested_at = now
            if a.outcome == "hang":
                self.final = Final(a.lease_at + self.lease_timeout_s, STOP_REASON, RUN_CANCELLED)
            self.cache = None
        return StopResult(200, self.view(now))
