"""One Moltaro status body in, one Verdict out (CONTRACT §2, docs/moltaro-wire.md).

A pure function of (kind, body, enum map): no I/O, no clock. It fails closed:
anything it cannot read with certainty keeps the tracking polling (ANOMALY or
INVALID), and a function job is reported succeeded only on the full evidence
the platform promises for Completed.

Anomaly reasons (bounded, used as a metric label):
``unknown_kind``, ``not_an_object``, ``missing_status``, ``invalid_status`` and
``uninterpretable`` (INVALID: not a status body); ``unknown_status``,
``completed_without_evidence`` and ``run_status_unresolved`` (ANOMALY).

``job_budget`` reads a function job's time budget from its body (CONTRACT
section 3): a job tracked without the caller's deadline gets one from the job
itself. ``TimeoutSeconds`` belongs to the job (null: the workspace's runtime
default); every attempt may take it, and a retry waits ``RetryDelaySeconds`` first.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from orchestrator.clock import iso
from orchestrator.interpret._read import (
    as_bool,
    as_id,
    as_int,
    as_mapping,
    as_number,
    as_str,
    as_text,
    as_timestamp,
    get_ci,
    json_safe,
    label,
    model_of,
)
from orchestrator.interpret.work import WorkTimes, work_times
from orchestrator.vocabulary import BUILD_CLASSES, STATUS_KINDS, TERMINAL_PHASES, Kind, Phase

JOB_STATUSES = ("Queued", "Leased", "Completed", "Failed", "Cancelled")
BUILD_STATUSES = ("Queued", "Running", "Succeeded", "Failed", "Cancelled")
# FunctionRunStatus is not printed in the platform documentation: these names are
# accepted on the wire, but its integers come only from the OpenAPI document.
RUN_STATUSES = ("Running", "Success", "Failed", "Skipped", "Cancelled", "TimedOut")


@dataclass(frozen=True, slots=True)
class EnumMap:
    """Integer enum values by lower-cased dotted property path of the status model.

    Paths are relative to the model itself (a ``Data`` envelope is stripped):
    ``"status"``, ``"kind"``, ``"run.status"``, ``"source"``.
    """

    values: Mapping[str, Mapping[int, str]]
    source: Literal["openapi", "fallback"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the interpreter says about one status body."""

    phase: Phase
    remote_status: str | None = None  # enum name, e.g. "Leased"
    fingerprint: str = ""  # changes exactly when the observable remote state changes
    next_run_at: float | None = None  # unix seconds, for a Queued job waiting for NextRunAt
    can_cancel: bool | None = None
    result: dict[str, Any] | None = None  # normalized, on terminal phases
    anomaly: str | None = None  # reason code on ANOMALY / INVALID
    details: dict[str, Any] = field(default_factory=dict)
    work: WorkTimes | None = None  # the work's class and own times; None on INVALID

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES


_Outcome = Literal["ok", "unreadable", "unresolved", "unknown"]

_BUILD_PHASES = {
    "Queued": Phase.PENDING,
    "Running": Phase.PENDING,
    "Succeeded": Phase.SUCCEEDED,
    "Failed": Phase.FAILED,
    "Cancelled": Phase.CANCELLED,
}
_SUCCESS_RUN_STATUSES = frozenset({"Success", "Skipped"})
# Each set of documented enum names by its case-folded spelling.
_JOB_NAMES, _BUILD_NAMES, _RUN_NAMES, _CLASS_NAMES = (
    {name.casefold(): name for name in names}
    for names in (JOB_STATUSES, BUILD_STATUSES, RUN_STATUSES, BUILD_CLASSES)
)
_MAX_ATTEMPTS = 1000  # beyond this a body's EffectiveMaxAttempts is not believed
_KINDS = frozenset(STATUS_KINDS)


def interpret(kind: str, body: Any, enums: EnumMap) -> Verdict:
    """What a status body says, for a ``function_job`` or a build kind. Never raises."""
    try:
        verdict = _interpret(kind, body, enums)
        if verdict.phase is Phase.INVALID:
            return verdict
        return dataclasses.replace(
            verdict, work=work_times(kind, body, enums.values.get("kind", {}))
        )
    except Exception:
        # A bug here must not take a poll loop down: the body is then simply not
        # understood, which keeps the tracking polling and shows in the metrics.
        return _invalid("uninterpretable", kind)


def _interpret(kind: str, body: Any, enums: EnumMap) -> Verdict:
    if kind not in _KINDS:
        return _invalid("unknown_kind", kind)
    if not isinstance(body, Mapping):
        return _invalid("not_an_object", kind)
    model = model_of(body)
    raw = get_ci(model, "Status")
    if raw is None:
        return _invalid("missing_status", kind)
    documented = _JOB_NAMES if kind == Kind.FUNCTION_JOB else _BUILD_NAMES
    status, outcome = _enum_name(raw, enums, "status", documented)
    if outcome == "unreadable":
        return _invalid("invalid_status", kind, raw_status=label(raw))
    if outcome != "ok" or status is None:
        return Verdict(
            phase=Phase.ANOMALY,
            remote_status=status,
            fingerprint=_fingerprint(status, kind, "anomaly", label(raw)),
            anomaly="unknown_status",
            details={"kind": kind, "raw_status": label(raw), "enum_source": enums.source},
        )
    if kind == Kind.FUNCTION_JOB:
        return _job(model, status, enums)
    return _build(kind, model, status, enums)


def _job(model: Mapping[str, Any], status: str, enums: EnumMap) -> Verdict:
    run = as_mapping(get_ci(model, "Run"))
    run_raw = get_ci(run, "Status")
    run_status, run_outcome = _enum_name(run_raw, enums, "run.status", _RUN_NAMES)
    attempt = as_int(get_ci(model, "CurrentAttempt"))
    if attempt is None:
        attempt = as_int(get_ci(run, "Attempt"))
    can_cancel = as_bool(get_ci(model, "CanCancel"))
    next_run_raw = get_ci(model, "NextRunAt")
    next_run_at = as_timestamp(next_run_raw)
    details: dict[str, Any] = {"kind": Kind.FUNCTION_JOB, "enum_source": enums.source}
    if run_status is not None:
        details["run_status"] = run_status

    phase = Phase.PENDING
    anomaly: str | None = None
    result: dict[str, Any] | None = None
    if status == "Completed":
        missing = missing_evidence(run, run_status if run_outcome == "ok" else None)
        if run_outcome == "unresolved":
            phase, anomaly = Phase.ANOMALY, "run_status_unresolved"
            details["raw_run_status"] = label(run_raw)
        elif missing:
            phase, anomaly = Phase.ANOMALY, "completed_without_evidence"
        else:
            phase = Phase.SUCCEEDED
            result = {
                "remote_status": status,
                "run_id": as_id(get_ci(run, "RunId")),
                "run_status": run_status,
                "attempt": attempt,
                "result_summary": as_str(get_ci(run, "ResultSummary")),
                "result_data": json_safe(get_ci(run, "ResultData")),
                "duration_ms": as_number(get_ci(run, "DurationMs")),
                "completed_at": iso(as_timestamp(get_ci(run, "CompletedAt"))),
            }
        if missing:
            details["missing_evidence"] = missing
    elif status == "Failed":
        phase = Phase.FAILED
        result = {
            "remote_status": status,
            "last_error": as_str(get_ci(model, "LastError")),
            "error_summary": as_str(get_ci(run, "ErrorSummary")),
            "run_status": run_status,
            "attempt": attempt,
            "will_retry": as_bool(get_ci(model, "WillRetry")),
        }
    elif status == "Cancelled":
        phase = Phase.CANCELLED
        result = {
            "remote_status": status,
            "cancellation_reason_code": as_str(get_ci(model, "CancellationReasonCode")),
            "last_error": as_str(get_ci(model, "LastError")),
            "attempt": attempt,
        }

    fingerprint = _fingerprint(
        status,
        Kind.FUNCTION_JOB,
        phase.value,
        anomaly or "",
        label(attempt),
        label(as_id(get_ci(run, "RunId"))),
        run_status or label(run_raw),
        label(next_run_at) if next_run_at is not None else label(next_run_raw),
        _folded(get_ci(model, "RetryStopState")),
        label(as_bool(get_ci(model, "WillRetry"))),
        label(can_cancel),
        label(as_str(get_ci(model, "CancellationReasonCode"))),
    )
    return Verdict(
        phase=phase,
        remote_status=status,
        fingerprint=fingerprint,
        next_run_at=next_run_at if status == "Queued" else None,
        can_cancel=can_cancel,
        result=result,
        anomaly=anomaly,
        details=details,
    )


def missing_evidence(run: Mapping[str, Any] | None, run_status: str | None) -> list[str]:
    """What a Completed job lacks of its Run evidence (empty when it is all there).

    The platform publishes Completed only once the run is durably Success or
    Skipped with CompletedAt, DurationMs and a non-empty ResultSummary; the same
    rule judges a status body and a schedule's occurrence. ``run_status`` is the
    run's resolved status name (None when it could not be resolved).
    """
    if run is None:
        return ["run"]
    missing = []
    if run_status not in _SUCCESS_RUN_STATUSES:
        missing.append("run.status")
    if as_timestamp(get_ci(run, "CompletedAt")) is None:
        missing.append("run.completed_at")
    duration = as_number(get_ci(run, "DurationMs"))
    if duration is None or duration < 0:
        missing.append("run.duration_ms")
    if as_text(get_ci(run, "ResultSummary")) is None:
        missing.append("run.result_summary")
    return missing


def _build(kind: str, model: Mapping[str, Any], status: str, enums: EnumMap) -> Verdict:
    kind_raw = get_ci(model, "Kind")
    build_kind, _ = _enum_name(kind_raw, enums, "kind", _CLASS_NAMES)
    if build_kind not in BUILD_CLASSES:
        build_kind = None
    phase = _BUILD_PHASES[status]
    artifact_id = as_id(get_ci(model, "ArtifactId"))
    failure = _failure(get_ci(model, "Failure"))
    details: dict[str, Any] = {"kind": kind, "build_kind": build_kind, "enum_source": enums.source}
    if build_kind is None and kind_raw is not None:
        details["raw_build_kind"] = label(kind_raw)

    result: dict[str, Any] | None = None
    if phase is not Phase.PENDING:
        result = {"remote_status": status, "build_kind": build_kind, "artifact_id": artifact_id}
        if phase is not Phase.SUCCEEDED:
            result["error_summary"] = as_str(get_ci(model, "ErrorSummary"))
        if phase is Phase.FAILED:
            result["failure"] = failure
            if failure is not None:
                details["reason_code"] = failure["reason_code"]

    fingerprint = _fingerprint(
        status,
        kind,
        phase.value,
        build_kind or label(kind_raw),
        label(artifact_id),
        label(failure["reason_code"]) if failure else "",
    )
    return Verdict(phase, status, fingerprint, result=result, details=details)


def _failure(raw: Any) -> dict[str, Any] | None:
    """The build Failure object, normalized; its ReasonCode is what callers branch on."""
    failure = as_mapping(raw)
    if failure is None:
        return None
    return {
        "reason_code": as_str(get_ci(failure, "ReasonCode")),
        "category": as_str(get_ci(failure, "Category")),
        "retryable": as_bool(get_ci(failure, "Retryable")),
        "sql_state": _sql_state(get_ci(failure, "SqlState")),
        "safe_target": as_str(get_ci(failure, "SafeTarget")),
        "remediation_code": as_str(get_ci(failure, "RemediationCode")),
        "summary": as_str(get_ci(failure, "Summary")),
    }


def _sql_state(raw: Any) -> str | None:
    """A PostgreSQL SQLSTATE: five digits or upper-case letters (53100 may arrive as a number)."""
    if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw <= 99999:
        return f"{raw:05d}"
    if isinstance(raw, str):
        text = raw.strip().upper()
        if len(text) == 5 and text.isascii() and text.isalnum():
            return text
    return None


def _enum_name(
    raw: Any, enums: EnumMap, path: str, documented: Mapping[str, str]
) -> tuple[str | None, _Outcome]:
    """The documented name of an enum value given as an integer or as a name.

    Returns the name (or the unknown name as received) and how the reading went.
    """
    number = as_int(raw)
    if number is not None:
        mapped = enums.values.get(path, {}).get(number)
        if mapped is None:
            return None, "unresolved"
        name = documented.get(mapped.strip().casefold())
        return (name, "ok") if name is not None else (mapped, "unknown")
    if isinstance(raw, str) and raw.strip():
        name = documented.get(raw.strip().casefold())
        return (name, "ok") if name is not None else (label(raw.strip()), "unknown")
    return None, "unreadable"


def _folded(raw: Any) -> str:
    return label(raw).casefold() if isinstance(raw, str) else label(raw)


def _fingerprint(status: str | None, *parts: str) -> str:
    joined = "\x1f".join((status or "", *parts)).encode("utf-8", "backslashreplace")
    digest = hashlib.blake2b(joined, digest_size=8)
    # Shared: a million trackings in one state hold one string, not 72 bytes each.
    return sys.intern(f"{status or '?'}:{digest.hexdigest()}")


def _invalid(reason: str, kind: str, **details: Any) -> Verdict:
    return Verdict(
        phase=Phase.INVALID,
        fingerprint=_fingerprint(None, "invalid", reason),
        anomaly=reason,
        details={"kind": label(kind), **details},
    )


def job_budget(body: Any, default_timeout_s: float) -> float | None:
    """TimeoutSeconds x EffectiveMaxAttempts + RetryDelaySeconds x (attempts - 1).

    None when the body does not show the attempts (or, with retries, their
    delay): the tracking then keeps its default deadline rather than guess.
    """
    if not isinstance(body, Mapping):
        return None
    model = model_of(body) or body  # an empty Data envelope reads as no envelope
    attempts = as_int(get_ci(model, "EffectiveMaxAttempts"))
    if attempts is None or not 1 <= attempts <= _MAX_ATTEMPTS:
        return None
    timeout = as_number(get_ci(model, "TimeoutSeconds"))
    if timeout is None or timeout <= 0:
        timeout = default_timeout_s
    delay = as_number(get_ci(model, "RetryDelaySeconds"))
    if delay is None or delay < 0:
        if attempts > 1:
            return None
        delay = 0
    return float(timeout * attempts + delay * (attempts - 1))
