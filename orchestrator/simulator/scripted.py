"""Jobs and builds whose exact timeline a test writes (``POST /_sim/script``).

Each step's body is computed once when the script is created; a read finds the
step in force by bisection. Cancel and stop-retries impose an override.
"""

from __future__ import annotations

import bisect
import copy
from dataclasses import dataclass
from typing import Any

from orchestrator.clock import iso, parse_iso
from orchestrator.simulator.builds import FAILURES, build_body, failure_body, terminal_fields
from orchestrator.simulator.enums import (
    B_FAILED,
    B_QUEUED,
    CANCELLED,
    COMPLETED,
    FAILED,
    JOB_STATUS,
    LEASED,
    NET_BUILD_STATUS,
    QUEUED,
    RUN_CANCELLED,
    RUN_FAILED,
    RUN_RUNNING,
    RUN_SKIPPED,
    RUN_STATUS,
    RUN_SUCCESS,
    RUN_TIMED_OUT,
    UI_BUILD_STATUS,
    WireEnum,
)
from orchestrator.simulator.model import STOP_REASON, JobMeta, StopResult, View, same_instant

_STEP_KEYS = frozenset(
    {
        "after_s",
        "status",
        "run",
        "failure",
        "last_error",
        "fields",
        "remove",
        "not_found",
        "next_run_at_in_s",
    }
)


class ScriptError(ValueError):
    """The script is not valid (answered 400, naming the step)."""


@dataclass(slots=True)
class Step:
    at: float
    body: dict[str, Any] | None  # None: the id answers 404
    status: int
    raw: dict[str, Any]


def _number(raw: dict[str, Any], key: str, where: str) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ScriptError(f"{where}: {key} must be a non-negative number")
    return float(value)


def parse_steps(
    raw_steps: object, enum: WireEnum, t0: float
) -> list[tuple[float, int | None, dict[str, Any]]]:
    """(time, status or None for a status-less not_found step, raw step), in time order."""
    if not isinstance(raw_steps, list) or not raw_steps or len(raw_steps) > 1000:
        raise ScriptError("steps must be a non-empty list (at most 1000)")
    out: list[tuple[float, int | None, dict[str, Any]]] = []
    for n, raw in enumerate(raw_steps):
        where = f"steps[{n}]"
        if not isinstance(raw, dict):
            raise ScriptError(f"{where} must be an object")
        unknown = set(raw) - _STEP_KEYS
        if unknown:
            raise ScriptError(f"{where}: unknown field {sorted(unknown)[0]!r}")
        after = _number(raw, "after_s", where) or 0.0
        _number(raw, "next_run_at_in_s", where)
        status = enum.parse(raw["status"]) if raw.get("status") is not None else None
        if status is None and not (raw.get("not_found") is True and raw.get("status") is None):
            raise ScriptError(f"{where}: status must be one of {[n for n, _ in enum.members]}")
        for key, kind in (("run", dict), ("fields", dict), ("remove", list)):
            if raw.get(key) is not None and not isinstance(raw[key], kind):
                raise ScriptError(f"{where}: {key} must be a {kind.__name__} or null")
        if raw.get("last_error") is not None and not isinstance(raw["last_error"], str):
            raise ScriptError(f"{where}: last_error must be a string or null")
        if raw.get("remove") and not all(isinstance(k, str) for k in raw["remove"]):
            raise ScriptError(f"{where}: remove lists field names")
        out.append((t0 + after, status, raw))
    out.sort(key=lambda s: s[0])
    return out


def _apply_fields(body: dict[str, Any], raw: dict[str, Any]) -> None:
    body.update(raw.get("fields") or {})
    for key in raw.get("remove") or ():
        body.pop(key, None)


class _Timeline:
    steps: list[Step]
    override: Step | None
    cache: tuple[int, float, bytes] | None

    def _step_at(self, now: float) -> tuple[Step | None, float]:
        if self.override is not None and now >= self.override.at:
            return self.override, float("inf")
        times = [s.at for s in self.steps]
        i = bisect.bisect_right(times, now) - 1
        nxt = self.steps[i + 1].at if i + 1 < len(self.steps) else float("inf")
        if self.override is not None:
            nxt = min(nxt, self.override.at)
        return (self.steps[i] if i >= 0 else None), nxt

    def view(self, now: float) -> View | None:
        step, until = self._step_at(now)
        if step is None or step.body is None:
            return None
        body = step.body
        return View(body, step.status, step.at, until, can_cancel=body.get("CanCancel") is True)


class ScriptedJob(_Timeline):
    def __init__(self, meta: JobMeta, raw_steps: object, new_run_id: Any) -> None:
        self.meta = meta
        self.override = None
        self.cache = None
        self.stop_requested_at: float | None = None
        self.steps = []
        run: dict[str, Any] | None = None
        attempt, last_error, status = 0, None, QUEUED
        for at, parsed, raw in parse_steps(raw_steps, JOB_STATUS, meta.created_at):
            previous, status = status, (status if parsed is None else parsed)
            if parsed is None:
                self.steps.append(Step(at, None, status, raw))
                continue
            if status == LEASED and (previous != LEASED or run is None):
                attempt += 1
                run = self._run(new_run_id("run"), attempt, at)
            elif status in (COMPLETED, FAILED, CANCELLED) and run is None and status != CANCELLED:
                attempt = 1
                run = self._run(new_run_id("run"), attempt, at)
            if run is not None and run["Status"] == RUN_RUNNING and status != LEASED:
                done = {COMPLETED: RUN_SUCCESS, FAILED: RUN_FAILED, CANCELLED: RUN_CANCELLED}
                if status in done:
                    self._finish(run, done[status], at)
            if status == FAILED and last_error is None:
                last_error = "Scripted failure"
            if "run" in raw:
                run = self._merge_run(run, raw["run"], new_run_id, max(attempt, 1), at)
            if "last_error" in raw:
                last_error = raw["last_error"]
            next_in = raw.get("next_run_at_in_s")
            body = meta.base_body()
            body.update(
                Status=status,
                CanCancel=status == QUEUED,
                CurrentAttempt=attempt,
                RemainingAttempts=max(meta.max_attempts - attempt, 0),
                NextRunAt=iso(at + next_in) if next_in is not None else None,
                WillRetry=status == QUEUED and next_in is not None,
                CanStopRetries=status in (QUEUED, LEASED),
                RetryStopState="None",
                CancellationReasonCode=None,
                ReasonCodes=[],
                ModifiedAt=iso(at),
                LastError=last_error if status != COMPLETED else None,
                Run=copy.deepcopy(run),
            )
            _apply_fields(body, raw)
            self.steps.append(Step(at, body, status, raw))

    def _run(self, run_id: str, attempt: int, at: float) -> dict[str, Any]:
        return {
            "RunId": run_id,
            "JobId": self.meta.job_id,
            "Attempt": attempt,
            "Status": RUN_RUNNING,
            "StartedAt": iso(at),
            "CompletedAt": None,
            "DurationMs": None,
            "ResultSummary": None,
            "ResultData": None,
            "ErrorSummary": None,
        }

    def _merge_run(
        self, run: dict[str, Any] | None, raw: dict[str, Any] | None, new_id: Any, n: int, at: float
    ) -> dict[str, Any] | None:
        """A step's ``run`` merged over the run in force (a complete default run of its status)."""
        if raw is None:
            return None
        merged = dict(run) if run is not None else self._run(new_id("run"), n, at)
        status = RUN_STATUS.parse(raw.get("Status", merged["Status"]))
        if status is not None and status != merged["Status"] and status != RUN_RUNNING:
            self._finish(merged, status, at)
        merged.update(raw)
        if status is not None:
            merged["Status"] = status
        return merged

    @staticmethod
    def _finish(run: dict[str, Any], status: int, at: float) -> None:
        started = run["StartedAt"]
        run.update(Status=status, CompletedAt=iso(at))
        run["DurationMs"] = max(0, round((at - parse_iso(started)) * 1000)) if started else 0
        if status == RUN_SUCCESS:
            run.update(ResultSummary="Scripted result", ResultData={"scripted": True})
        elif status == RUN_SKIPPED:
            run.update(ResultSummary="Skipped: nothing to do", ResultData=None)
        elif status in (RUN_FAILED, RUN_TIMED_OUT):
            run["ErrorSummary"] = "Scripted failure"

    def _impose(self, now: float, base: dict[str, Any], reason: str | None) -> None:
        body = copy.deepcopy(base)
        body.update(
            Status=CANCELLED,
            CanCancel=False,
            CanStopRetries=False,
            WillRetry=False,
            NextRunAt=None,
            ModifiedAt=iso(now),
        )
        if reason:
            body.update(
                RetryStopState="Stopped", CancellationReasonCode=reason, ReasonCodes=[reason]
            )
        self.override = Step(now, body, CANCELLED, {})
        self.cache = None

    def cancel(self, now: float) -> tuple[bool, View]:
        view = self.view(now)
        if view is None or not view.can_cancel:
            return False, view or View({}, -1, now)
        self._impose(now, view.body, None)
        return True, self.view(now) or view

    def stop_retries(self, now: float, expected_modified_at: float) -> StopResult:
        view = self.view(now) or View({}, -1, now)
        if self.stop_requested_at is not None:
            return StopResult(200, view)
        if view.status not in (QUEUED, LEASED):
            return StopResult(409, view, "The job is already terminal.")
        if not same_instant(expected_modified_at, view.modified_at):
            return StopResult(409, view, "ExpectedModifiedAt is stale: the job has changed.")
        self.stop_requested_at = now
        if view.status == QUEUED:
            self._impose(now, view.body, STOP_REASON)
            return StopResult(200, self.view(now) or view)
        # A live lease: later steps keep their own outcome, but no new attempt starts
        # and only a success survives; everything is marked with the stop.
        for step in self.steps:
            if step.at <= now or step.body is None:
                continue
            step.body = copy.deepcopy(step.body)
            terminal = step.status in (COMPLETED, FAILED, CANCELLED)
            step.body.update(
                RetryStopState="Stopped" if terminal else "Requested",
                CancellationReasonCode=STOP_REASON,
                CanStopRetries=False,
            )
            if step.status != LEASED and step.status != COMPLETED:
                self._impose(step.at, step.body, STOP_REASON)
                break
        current = copy.deepcopy(view.body)
        current.update(
            RetryStopState="Requested",
            CancellationReasonCode=STOP_REASON,
            CanStopRetries=False,
            ModifiedAt=iso(now),
        )
        self.steps.insert(
            bisect.bisect_right([s.at for s in self.steps], now), Step(now, current, LEASED, {})
        )
        self.cache = None
        return StopResult(200, self.view(now) or view)

    def runs(self, now: float) -> list[dict[str, Any]]:
        seen: dict[str, dict[str, Any]] = {}
        for step in self.steps:
            if step.at > now:
                break
            run = (step.body or {}).get("Run")
            if isinstance(run, dict) and isinstance(run.get("RunId"), str):
                seen[run["RunId"]] = {**run, **self.meta.run_extras()}
        return list(seen.values())

    def run_starts(self) -> list[float] | None:
        runs = [(step.body or {}).get("Run") for step in self.steps]
        texts = [r["StartedAt"] for r in runs if isinstance(r, dict) and r.get("StartedAt")]
        # A script may give a run any StartedAt; a job with one that is not a time
        # is read by every run list, as every job used to be.
        try:
            return [parse_iso(text) for text in texts]
        except (AttributeError, ValueError, OverflowError):
            return None


class ScriptedBuild(_Timeline):
    def __init__(
        self, build_id: str, project: str, kind: int, created_at: float, raw_steps: object
    ) -> None:
        self.build_id = build_id
        self.project = project
        self.created_at = created_at
        self.override = None
        self.cache = None
        self.steps = []
        enum = NET_BUILD_STATUS if project == "net" else UI_BUILD_STATUS
        started: float | None = None
        status = B_QUEUED
        for at, parsed, raw in parse_steps(raw_steps, enum, created_at):
            status = status if parsed is None else parsed
            if parsed is None:
                self.steps.append(Step(at, None, status, raw))
                continue
            if status != B_QUEUED and started is None:
                started = at
            terminal = status >= 2
            body = build_body(
                build_id, status, kind, created_at, started, at if terminal else None, at
            )
            # Each ReasonCode carries its own text: the ErrorSummary follows the
            # failure a step names (a scripted failure without one is a storage one).
            failure = raw.get("failure")
            code = failure if isinstance(failure, str) else None
            if isinstance(failure, dict) and isinstance(failure.get("ReasonCode"), str):
                code = failure["ReasonCode"]
            reason = code if code in FAILURES else "storage_capacity_exhausted"
            body.update(terminal_fields(project, status, build_id, reason))
            if "failure" in raw:
                if isinstance(failure, str):
                    try:
                        failure = failure_body(failure)
                    except KeyError:
                        raise ScriptError(f"unknown failure ReasonCode {failure!r}") from None
                elif failure is not None and not isinstance(failure, dict):
                    raise ScriptError("failure must be an object, a ReasonCode or null")
                body["Failure"] = failure
            if status == B_FAILED and raw.get("last_error") is not None:
                body["ErrorSummary"] = raw["last_error"]
            _apply_fields(body, raw)
            self.steps.append(Step(at, body, status, raw))
