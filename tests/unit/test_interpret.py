"""The interpreter, table by table: every status of every kind, every anomaly, the evidence rule."""

from __future__ import annotations

import copy
import json
import math
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from orchestrator.interpret import (
    TERMINAL_PHASES,
    EnumMap,
    Phase,
    Verdict,
    fallback_enums,
    interpret,
)

JOB_STATUS = {0: "Queued", 1: "Leased", 2: "Completed", 3: "Failed", 4: "Cancelled"}
RUN_STATUS = {0: "Running", 1: "Success", 2: "Failed", 3: "Skipped", 4: "Cancelled", 5: "TimedOut"}
BUILD_STATUS = {0: "Queued", 1: "Running", 2: "Succeeded", 3: "Failed", 4: "Cancelled"}

# What resolve_enums yields for the simulator's document.
JOB_ENUMS = EnumMap(
    values={
        "status": JOB_STATUS,
        "run.status": RUN_STATUS,
        "source": {0: "Api", 1: "Schedule", 2: "Trigger", 3: "Action", 4: "Test", 5: "FollowUp"},
    },
    source="openapi",
)
NET_ENUMS = EnumMap(
    values={"status": BUILD_STATUS, "kind": {0: "Build", 1: "Check"}}, source="openapi"
)
UI_ENUMS = EnumMap(
    values={"status": BUILD_STATUS, "kind": {0: "Check", 1: "Build"}}, source="openapi"
)
BUILD_ENUMS = {"net_operation_build": NET_ENUMS, "workspace_ui_build": UI_ENUMS}


def run_body(**fields: Any) -> dict[str, Any]:
    run: dict[str, Any] = {
        "RunId": "run-9a8b7c6d",
        "JobId": "job-1",
        "Attempt": 1,
        "Status": 1,
        "StartedAt": "2026-11-29T19:30:01.250Z",
        "CompletedAt": "2026-11-29T19:30:02.000Z",
        "DurationMs": 750,
        "ResultSummary": "3 invoices synced",
        "ResultData": {"invoices": [1, 2, 3]},
        "ErrorSummary": None,
    }
    run.update(fields)
    return run


def job_body(status: Any, *, run: Any = "default", **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "JobId": "job-1",
        "FunctionKey": "billing.sync-invoices",
        "Source": 0,
        "Status": status,
        "CanCancel": False,
        "TimeoutSeconds": 300,
        "CurrentAttempt": 1,
        "EffectiveMaxAttempts": 3,
        "RemainingAttempts": 2,
        "RetryDelaySeconds": 30,
        "NextRunAt": None,
        "WillRetry": False,
        "CanStopRetries": True,
        "RetryStopState": "None",
        "CancellationReasonCode": None,
        "ReasonCodes": [],
        "CreatedAt": "2026-11-29T19:30:00.000Z",
        "ModifiedAt": "2026-11-29T19:30:01.250Z",
        "LastError": None,
        "StatusUrl": "/api/workspace/functions/jobs/job-1",
        "Run": run_body() if run == "default" else run,
    }
    body.update(fields)
    return body


def build_body(status: Any, kind: Any = 0, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "Id": "bld-3e2d1c0b",
        "Status": status,
        "Kind": kind,
        "CreatedAt": "2026-11-29T19:30:00.000Z",
        "CompletedAt": None,
        "ArtifactId": None,
        "ErrorSummary": None,
        "Failure": None,
    }
    body.update(fields)
    return body


def camel(value: Any) -> Any:
    if isinstance(value, dict):
        return {k[:1].lower() + k[1:]: camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [camel(v) for v in value]
    return value


def names_for(body: dict[str, Any], table: dict[int, str], path: str = "Status") -> dict[str, Any]:
    out = copy.deepcopy(body)
    out[path] = table[out[path]]
    return out


FORMS = ["int", "name", "lower_name", "upper_name", "numeric_text", "camel", "data", "camel_data"]


def shaped(body: dict[str, Any], table: dict[int, str], form: str) -> Any:
    """The same status body in one of the representations the wire allows."""
    body = copy.deepcopy(body)
    value = body["Status"]
    if form == "name":
        body["Status"] = table[value]
    elif form == "lower_name":
        body["Status"] = table[value].lower()
    elif form == "upper_name":
        body["Status"] = table[value].upper()
    elif form == "numeric_text":
        body["Status"] = str(value)
    elif form == "camel":
        return camel(body)
    elif form == "data":
        return {"Succeeded": True, "Data": body}
    elif form == "camel_data":
        return camel({"Succeeded": True, "Data": body})
    return body


def assert_json(verdict: Verdict) -> None:
    for part in (verdict.result, verdict.details):
        json.dumps(part, allow_nan=False)
        orjson.dumps(part)


# --- every status of every kind, in every representation ---------------------------------

JOB_CASES = [
    (0, Phase.PENDING),
    (1, Phase.PENDING),
    (2, Phase.SUCCEEDED),
    (3, Phase.FAILED),
    (4, Phase.CANCELLED),
]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(("value", "phase"), JOB_CASES)
def test_every_job_status_in_every_form(value: int, phase: Phase, form: str) -> None:
    verdict = interpret("function_job", shaped(job_body(value), JOB_STATUS, form), JOB_ENUMS)
    assert verdict.phase is phase
    assert verdict.remote_status == JOB_STATUS[value]
    assert verdict.anomaly is None
    assert verdict.terminal is (phase in TERMINAL_PHASES)
    assert (verdict.result is not None) is verdict.terminal
    if verdict.result is not None:
        assert verdict.result["remote_status"] == JOB_STATUS[value]
    assert_json(verdict)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("kind", ["net_operation_build", "workspace_ui_build"])
@pytest.mark.parametrize(
    ("value", "phase"),
    [
        (0, Phase.PENDING),
        (1, Phase.PENDING),
        (2, Phase.SUCCEEDED),
        (3, Phase.FAILED),
        (4, Phase.CANCELLED),
    ],
)
def test_every_build_status_in_every_form(kind: str, value: int, phase: Phase, form: str) -> None:
    body = build_body(value, ArtifactId="art-1" if value == 2 else None)
    verdict = interpret(kind, shaped(body, BUILD_STATUS, form), BUILD_ENUMS[kind])
    assert verdict.phase is phase
    assert verdict.remote_status == BUILD_STATUS[value]
    assert verdict.anomaly is None
    assert (verdict.result is not None) is verdict.terminal
    if phase is Phase.SUCCEEDED:
        assert verdict.result is not None
        assert verdict.result["artifact_id"] == "art-1"
    assert_json(verdict)


@pytest.mark.parametrize("kind", ["function_job", "net_operation_build", "workspace_ui_build"])
def test_fallback_map_reads_every_documented_status(kind: str) -> None:
    enums = fallback_enums(kind)
    table = JOB_STATUS if kind == "function_job" else BUILD_STATUS
    for value, name in table.items():
        # Run status by name: the fallback cannot resolve its integers.
        body = (
            job_body(value, run=run_body(Status="Success"))
            if kind == "function_job"
            else build_body(value)
        )
        verdict = interpret(kind, body, enums)
        assert verdict.remote_status == name
        assert verdict.phase is not Phase.ANOMALY
        assert verdict.details["enum_source"] == "fallback"


def test_float_integral_status_is_read() -> None:
    assert interpret("function_job", job_body(1.0), JOB_ENUMS).remote_status == "Leased"


def test_status_names_come_from_the_map() -> None:
    # An installation whose document numbers statuses differently is believed.
    renumbered = EnumMap(values={"status": {7: "LEASED"}}, source="openapi")
    verdict = interpret("function_job", job_body(7), renumbered)
    assert verdict.phase is Phase.PENDING
    assert verdict.remote_status == "Leased"  # canonicalised to the documented spelling


def test_exact_field_name_wins_over_case_variant() -> None:
    body = job_body(1)
    body["status"] = 3
    assert interpret("function_job", body, JOB_ENUMS).remote_status == "Leased"


def test_null_field_reads_as_absent_when_a_variant_has_a_value() -> None:
    body = camel(job_body(4))
    body["Status"] = None
    assert interpret("function_job", body, JOB_ENUMS).remote_status == "Cancelled"


def test_top_level_status_wins_over_data_envelope() -> None:
    body = job_body(1)
    body["Data"] = job_body(3)
    assert interpret("function_job", body, JOB_ENUMS).remote_status == "Leased"


# --- build kinds by name -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "raw", "name"),
    [
        ("net_operation_build", 0, "Build"),
        ("net_operation_build", 1, "Check"),
        ("workspace_ui_build", 0, "Check"),
        ("workspace_ui_build", 1, "Build"),
        ("net_operation_build", "check", "Check"),
        ("workspace_ui_build", "BUILD", "Build"),
        ("workspace_ui_build", "1", "Build"),
    ],
)
def test_build_kind_by_name(kind: str, raw: Any, name: str) -> None:
    for enums in (BUILD_ENUMS[kind], fallback_enums(kind)):
        verdict = interpret(kind, build_body(2, raw, ArtifactId="a"), enums)
        assert verdict.details["build_kind"] == name
        assert verdict.result is not None
        assert verdict.result["build_kind"] == name


def test_same_kind_int_names_differ_by_project_type() -> None:
    net = interpret("net_operation_build", build_body(0, 0), NET_ENUMS)
    ui = interpret("workspace_ui_build", build_body(0, 0), UI_ENUMS)
    assert (net.details["build_kind"], ui.details["build_kind"]) == ("Build", "Check")


@pytest.mark.parametrize("raw", [7, "Deploy", True, None, [0]])
def test_unknown_build_kind_is_reported_but_not_an_anomaly(raw: Any) -> None:
    verdict = interpret("net_operation_build", build_body(1, raw), NET_ENUMS)
    assert verdict.phase is Phase.PENDING
    assert verdict.details["build_kind"] is None


# --- bodies that are not status bodies, and statuses we do not know -----------------------


@pytest.mark.parametrize(
    ("kind", "body", "reason"),
    [
        ("function_job", None, "not_an_object"),
        ("function_job", [job_body(1)], "not_an_object"),
        ("function_job", "Leased", "not_an_object"),
        ("function_job", 1, "not_an_object"),
        ("net_operation_build", b"{}", "not_an_object"),
        ("function_job", {}, "missing_status"),
        ("function_job", {"Status": None}, "missing_status"),
        ("function_job", {"Data": None}, "missing_status"),
        ("function_job", {"Data": {"JobId": "j"}}, "missing_status"),
        ("function_job", {"Data": [job_body(1)]}, "missing_status"),
        ("workspace_ui_build", {"Id": "b", "Kind": 0}, "missing_status"),
        ("function_job", {"Status": True}, "invalid_status"),
        ("function_job", {"Status": 1.5}, "invalid_status"),
        ("function_job", {"Status": float("nan")}, "invalid_status"),
        ("function_job", {"Status": ""}, "invalid_status"),
        ("function_job", {"Status": "   "}, "invalid_status"),
        ("function_job", {"Status": [1]}, "invalid_status"),
        ("function_job", {"Status": {"Value": 1}}, "invalid_status"),
        ("function_job", {"Status": 10**5000}, "invalid_status"),
        ("batch_job", job_body(1), "unknown_kind"),
    ],
)
def test_invalid_bodies(kind: str, body: Any, reason: str) -> None:
    enums = JOB_ENUMS if kind == "function_job" else NET_ENUMS
    verdict = interpret(kind, body, enums)
    assert verdict.phase is Phase.INVALID
    assert verdict.anomaly == reason
    assert verdict.result is None
    assert not verdict.terminal
    assert_json(verdict)


@pytest.mark.parametrize(
    ("kind", "status", "enums"),
    [
        ("function_job", 9, JOB_ENUMS),
        ("function_job", -1, JOB_ENUMS),
        ("function_job", "Paused", JOB_ENUMS),
        ("function_job", "Succeeded", JOB_ENUMS),  # a build name is not a job status
        ("function_job", "12", JOB_ENUMS),
        ("function_job", 2, EnumMap(values={}, source="openapi")),
        ("net_operation_build", "Completed", NET_ENUMS),
        ("net_operation_build", 5, NET_ENUMS),
        ("workspace_ui_build", "Leased", UI_ENUMS),
    ],
)
def test_unknown_status_is_an_anomaly(kind: str, status: Any, enums: EnumMap) -> None:
    body = job_body(status) if kind == "function_job" else build_body(status)
    verdict = interpret(kind, body, enums)
    assert verdict.phase is Phase.ANOMALY
    assert verdict.anomaly == "unknown_status"
    assert verdict.result is None
    assert "raw_status" in verdict.details
    assert_json(verdict)


def test_status_the_document_names_but_we_do_not_know_is_an_anomaly() -> None:
    enums = EnumMap(values={"status": {**JOB_STATUS, 5: "Paused"}}, source="openapi")
    verdict = interpret("function_job", job_body(5), enums)
    assert verdict.phase is Phase.ANOMALY
    assert verdict.anomaly == "unknown_status"
    assert verdict.remote_status == "Paused"


# --- the success evidence rule ------------------------------------------------------------


@pytest.mark.parametrize("run_status", [1, 3, "Success", "skipped", "SUCCESS", "1"])
def test_completed_with_evidence_succeeds(run_status: Any) -> None:
    verdict = interpret("function_job", job_body(2, run=run_body(Status=run_status)), JOB_ENUMS)
    assert verdict.phase is Phase.SUCCEEDED
    assert verdict.result is not None
    assert verdict.result["run_status"] in {"Success", "Skipped"}


@pytest.mark.parametrize(
    ("run", "missing"),
    [
        (None, ["run"]),
        ("absent", ["run"]),
        ("not a run", ["run"]),
        ([run_body()], ["run"]),
        (run_body(Status=0), ["run.status"]),
        (run_body(Status="Running"), ["run.status"]),
        (run_body(Status=2), ["run.status"]),
        (run_body(Status="Failed"), ["run.status"]),
        (run_body(Status="Cancelled"), ["run.status"]),
        (run_body(Status="TimedOut"), ["run.status"]),
        (run_body(Status="Paused"), ["run.status"]),
        (run_body(Status=None), ["run.status"]),
        (run_body(Status=True), ["run.status"]),
        (run_body(CompletedAt=None), ["run.completed_at"]),
        (run_body(CompletedAt=""), ["run.completed_at"]),
        (run_body(CompletedAt="yesterday"), ["run.completed_at"]),
        (run_body(CompletedAt=1764444600), ["run.completed_at"]),
        (run_body(DurationMs=None), ["run.duration_ms"]),
        (run_body(DurationMs="750"), ["run.duration_ms"]),
        (run_body(DurationMs=True), ["run.duration_ms"]),
        (run_body(DurationMs=-1), ["run.duration_ms"]),
        (run_body(DurationMs=math.nan), ["run.duration_ms"]),
        (run_body(DurationMs=math.inf), ["run.duration_ms"]),
        (run_body(DurationMs=10**30), ["run.duration_ms"]),
        (run_body(ResultSummary=None), ["run.result_summary"]),
        (run_body(ResultSummary=""), ["run.result_summary"]),
        (run_body(ResultSummary=" \t\n"), ["run.result_summary"]),
        (run_body(ResultSummary=42), ["run.result_summary"]),
        (run_body(ResultSummary=["done"]), ["run.result_summary"]),
        (
            run_body(Status=0, CompletedAt=None, DurationMs=None, ResultSummary=None),
            ["run.status", "run.completed_at", "run.duration_ms", "run.result_summary"],
        ),
    ],
)
def test_completed_without_each_piece_of_evidence_is_an_anomaly(
    run: Any, missing: list[str]
) -> None:
    body = job_body(2, run=run)
    if run == "absent":
        del body["Run"]
    for form in ("int", "name", "camel", "data"):
        verdict = interpret("function_job", shaped(body, JOB_STATUS, form), JOB_ENUMS)
        assert verdict.phase is Phase.ANOMALY, form
        assert verdict.anomaly == "completed_without_evidence"
        assert verdict.remote_status == "Completed"
        assert verdict.details["missing_evidence"] == missing
        assert verdict.result is None
        assert not verdict.terminal


def test_camel_case_run_fields_count_as_evidence() -> None:
    run = {
        "status": "Success",
        "completedAt": "2026-11-29T19:30:02Z",
        "durationMs": 0.5,
        "resultSummary": "ok",
    }
    verdict = interpret("function_job", {"status": "Completed", "run": run}, JOB_ENUMS)
    assert verdict.phase is Phase.SUCCEEDED


def test_evidence_must_be_on_the_run_not_the_job() -> None:
    body = job_body(2, run=run_body(CompletedAt=None, DurationMs=None, ResultSummary=None))
    body.update(CompletedAt="2026-11-29T19:30:02Z", DurationMs=5, ResultSummary="ok")
    assert interpret("function_job", body, JOB_ENUMS).anomaly == "completed_without_evidence"


@pytest.mark.parametrize("run_status", [1, 3, "1", 99])
def test_integer_run_status_without_the_document_is_unresolved(run_status: Any) -> None:
    enums = fallback_enums("function_job")
    verdict = interpret("function_job", job_body(2, run=run_body(Status=run_status)), enums)
    assert verdict.phase is Phase.ANOMALY
    assert verdict.anomaly == "run_status_unresolved"
    assert verdict.details["raw_run_status"] == str(run_status)


def test_unresolved_run_status_in_the_document_map_too() -> None:
    verdict = interpret("function_job", job_body(2, run=run_body(Status=42)), JOB_ENUMS)
    assert verdict.anomaly == "run_status_unresolved"


# --- results ----------------------------------------------------------------------------


def test_success_result() -> None:
    verdict = interpret("function_job", job_body(2, CurrentAttempt=2), JOB_ENUMS)
    assert verdict.result == {
        "remote_status": "Completed",
        "run_id": "run-9a8b7c6d",
        "run_status": "Success",
        "attempt": 2,
        "result_summary": "3 invoices synced",
        "result_data": {"invoices": [1, 2, 3]},
        "duration_ms": 750,
        "completed_at": "2026-11-29T19:30:02.000Z",
    }


def test_success_result_attempt_falls_back_to_the_run() -> None:
    body = job_body(2, run=run_body(Attempt=3))
    del body["CurrentAttempt"]
    verdict = interpret("function_job", body, JOB_ENUMS)
    assert verdict.result is not None
    assert verdict.result["attempt"] == 3


def test_failed_result() -> None:
    run = run_body(Status=2, CompletedAt=None, ResultSummary=None, ErrorSummary="boom at line 3")
    body = job_body(3, run=run, LastError="Function threw", WillRetry=False, CurrentAttempt=3)
    verdict = interpret("function_job", body, JOB_ENUMS)
    assert verdict.phase is Phase.FAILED
    assert verdict.result == {
        "remote_status": "Failed",
        "last_error": "Function threw",
        "error_summary": "boom at line 3",
        "run_status": "Failed",
        "attempt": 3,
        "will_retry": False,
    }


def test_failed_without_run_or_error_still_fails() -> None:
    verdict = interpret("function_job", {"Status": "Failed"}, JOB_ENUMS)
    assert verdict.phase is Phase.FAILED
    assert verdict.result is not None
    assert verdict.result["error_summary"] is None
    assert verdict.result["last_error"] is None


def test_cancelled_result() -> None:
    body = job_body(
        4, run=None, CancellationReasonCode="job.retry.stopRequested", LastError="stopped"
    )
    verdict = interpret("function_job", body, JOB_ENUMS)
    assert verdict.phase is Phase.CANCELLED
    assert verdict.result == {
        "remote_status": "Cancelled",
        "cancellation_reason_code": "job.retry.stopRequested",
        "last_error": "stopped",
        "attempt": 1,
    }


def test_result_data_is_made_json_safe() -> None:
    deep: Any = "bottom"
    for _ in range(200):
        deep = [deep]
    data = {
        "nan": math.nan,
        "inf": -math.inf,
        "big": 2**80,
        "huge": 10**400,
        "deep": deep,
        "t": (1, 2),
    }
    verdict = interpret("function_job", job_body(2, run=run_body(ResultData=data)), JOB_ENUMS)
    assert verdict.phase is Phase.SUCCEEDED
    assert verdict.result is not None
    result_data = verdict.result["result_data"]
    assert result_data["nan"] is None
    assert result_data["inf"] is None
    assert result_data["big"] == float(2**80)
    assert result_data["huge"] is None
    assert result_data["t"] == [1, 2]
    assert_json(verdict)


# --- pending details: NextRunAt and CanCancel ---------------------------------------------


def test_queued_job_exposes_next_run_at_and_can_cancel() -> None:
    body = job_body(0, run=None, NextRunAt="2026-11-29T19:31:00Z", CanCancel=True, WillRetry=True)
    verdict = interpret("function_job", body, JOB_ENUMS)
    assert verdict.phase is Phase.PENDING
    assert verdict.next_run_at == datetime(2026, 11, 29, 19, 31, tzinfo=UTC).timestamp()
    assert verdict.can_cancel is True


@pytest.mark.parametrize("next_run_at", [None, "", "soon", 1796067060, "2026-13-45T00:00:00Z"])
def test_unreadable_next_run_at_is_none(next_run_at: Any) -> None:
    verdict = interpret("function_job", job_body(0, NextRunAt=next_run_at), JOB_ENUMS)
    assert verdict.phase is Phase.PENDING
    assert verdict.next_run_at is None


def test_next_run_at_only_while_queued() -> None:
    body = job_body(1, NextRunAt="2026-11-29T19:31:00Z")
    assert interpret("function_job", body, JOB_ENUMS).next_run_at is None


@pytest.mark.parametrize(
    ("raw", "expected"), [(True, True), (False, False), ("true", None), (None, None)]
)
def test_can_cancel_is_a_strict_bool(raw: Any, expected: bool | None) -> None:
    assert interpret("function_job", job_body(0, CanCancel=raw), JOB_ENUMS).can_cancel is expected


def test_builds_have_no_can_cancel_or_next_run_at() -> None:
    verdict = interpret(
        "net_operation_build", build_body(0, NextRunAt="2026-11-29T19:31:00Z"), NET_ENUMS
    )
    assert (verdict.can_cancel, verdict.next_run_at) == (None, None)


# --- build failures -------------------------------------------------------------------------


def failure(
    reason: str, sql_state: Any = None, summary: str = "Le stockage est plein"
) -> dict[str, Any]:
    return {
        "ReasonCode": reason,
        "Category": "Storage",
        "Retryable": False,
        "SqlState": sql_state,
        "SafeTarget": "project_artifacts",
        "RemediationCode": "free_or_expand_storage",
        "Summary": summary,
    }


def test_storage_capacity_exhausted() -> None:
    body = build_body(3, 0, Failure=failure("storage_capacity_exhausted", "53100"))
    verdict = interpret("net_operation_build", body, NET_ENUMS)
    assert verdict.phase is Phase.FAILED
    assert verdict.details["reason_code"] == "storage_capacity_exhausted"
    assert verdict.result == {
        "remote_status": "Failed",
        "build_kind": "Build",
        "artifact_id": None,
        "error_summary": None,
        "failure": {
            "reason_code": "storage_capacity_exhausted",
            "category": "Storage",
            "retryable": False,
            "sql_state": "53100",
            "safe_target": "project_artifacts",
            "remediation_code": "free_or_expand_storage",
            "summary": "Le stockage est plein",
        },
    }


def test_publication_commit_unconfirmed() -> None:
    body = camel(build_body("failed", "check", Failure=failure("publication_commit_unconfirmed")))
    verdict = interpret("net_operation_build", body, NET_ENUMS)
    assert verdict.phase is Phase.FAILED
    assert verdict.result is not None
    assert verdict.result["failure"]["reason_code"] == "publication_commit_unconfirmed"
    assert verdict.result["failure"]["sql_state"] is None
    assert verdict.result["build_kind"] == "Check"


def test_reason_code_not_summary_decides() -> None:
    one = interpret(
        "net_operation_build",
        build_body(3, Failure=failure("compilation_failed", summary="a")),
        NET_ENUMS,
    )
    two = interpret(
        "net_operation_build",
        build_body(3, Failure=failure("compilation_failed", summary="b")),
        NET_ENUMS,
    )
    assert one.details["reason_code"] == two.details["reason_code"] == "compilation_failed"
    assert one.fingerprint == two.fingerprint  # the localized text is not state


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("53100", "53100"),
        (53100, "53100"),
        ("42p01", "42P01"),
        ("5310", None),
        ("53 00", None),
        (True, None),
        (-1, None),
    ],
)
def test_sql_state_is_validated(raw: Any, expected: str | None) -> None:
    verdict = interpret("net_operation_build", build_body(3, Failure=failure("x", raw)), NET_ENUMS)
    assert verdict.result is not None
    assert verdict.result["failure"]["sql_state"] == expected


def test_ui_build_failure_has_error_summary_and_no_failure() -> None:
    verdict = interpret(
        "workspace_ui_build", build_body(3, 1, ErrorSummary="tsc: 3 errors"), UI_ENUMS
    )
    assert verdict.phase is Phase.FAILED
    assert verdict.result is not None
    assert verdict.result["failure"] is None
    assert verdict.result["error_summary"] == "tsc: 3 errors"
    assert "reason_code" not in verdict.details


def test_cancelled_build_result() -> None:
    verdict = interpret("workspace_ui_build", build_body(4, 0), UI_ENUMS)
    assert verdict.result == {
        "remote_status": "Cancelled",
        "build_kind": "Check",
        "artifact_id": None,
        "error_summary": None,
    }


# --- fingerprints ---------------------------------------------------------------------------


def fp(body: Any, kind: str = "function_job") -> str:
    enums = JOB_ENUMS if kind == "function_job" else BUILD_ENUMS[kind]
    return interpret(kind, body, enums).fingerprint


@pytest.mark.parametrize("value", [0, 1, 2, 3, 4])
def test_fingerprint_ignores_representation(value: int) -> None:
    body = job_body(value, NextRunAt="2026-11-29T19:31:00Z" if value == 0 else None)
    prints = {fp(shaped(body, JOB_STATUS, form)) for form in FORMS}
    named_run = copy.deepcopy(body)
    named_run["Run"]["Status"] = "success"
    prints.add(fp(named_run))
    assert len(prints) == 1
    assert prints.pop().startswith(JOB_STATUS[value] + ":")


def test_fingerprint_ignores_timestamps_and_unknown_fields() -> None:
    base = job_body(1)
    assert fp(base) == fp({**base, "ModifiedAt": "2026-11-29T20:00:00Z", "Extra": [1, 2]})
    assert fp(base) == fp({**base, "NextRunAt": None, "LastError": None})


@pytest.mark.parametrize(
    "change",
    [
        {"Status": 0},
        {"CurrentAttempt": 2},
        {"Run": run_body(RunId="run-2")},
        {"Run": run_body(Status=0)},
        {"Run": None},
        {"NextRunAt": "2026-11-29T19:31:00Z"},
        {"RetryStopState": "Requested"},
        {"WillRetry": True},
        {"CanCancel": True},
        {"CancellationReasonCode": "job.retry.stopRequested"},
    ],
)
def test_fingerprint_changes_with_observable_state(change: dict[str, Any]) -> None:
    base = job_body(1)
    assert fp(base) != fp({**base, **change})


def test_fingerprint_changes_when_next_run_at_moves() -> None:
    one = job_body(0, NextRunAt="2026-11-29T19:31:00Z")
    two = job_body(0, NextRunAt="2026-11-29T19:32:00Z")
    same = job_body(0, NextRunAt="2026-11-29T19:31:00.000+00:00")
    assert fp(one) != fp(two)
    assert fp(one) == fp(same)


def test_fingerprint_changes_when_evidence_completes() -> None:
    partial = job_body(2, run=run_body(ResultSummary=None))
    assert fp(partial) != fp(job_body(2))


def test_build_fingerprint() -> None:
    kind = "net_operation_build"
    assert fp(build_body(0), kind) != fp(build_body(1), kind)
    assert fp(build_body(1), kind) == fp(camel(names_for(build_body(1), BUILD_STATUS)), kind)
    assert fp(build_body(2, ArtifactId="a"), kind) != fp(build_body(2, ArtifactId="b"), kind)
    assert fp(build_body(1, 0), kind) != fp(build_body(1, 1), kind)


def test_fingerprint_is_short() -> None:
    body = job_body(1, run=run_body(RunId="r" * 200))
    assert len(fp(body)) < 40


# --- never raises -----------------------------------------------------------------------------


def test_pathological_bodies_do_not_raise() -> None:
    deep: Any = {}
    cursor = deep
    for _ in range(10_000):
        cursor["Data"] = {}
        cursor = cursor["Data"]
    bodies: list[Any] = [
        deep,
        {"Status": 2, "Run": deep},
        {
            "Status": "Completed",
            "Run": {
                "Status": "Success",
                "CompletedAt": "9999-12-31T23:59:59Z",
                "DurationMs": 1e308,
                "ResultSummary": "x" * 100_000,
            },
        },
        {"Status": 2, "Run": {"Status": 1, "CompletedAt": "0001-01-01T00:00:00-23:59"}},
        {1: "Leased", None: 2, ("t",): 3, "Status": "Leased"},
        {"Status": "\ud800"},
        {
            "Status": "Failed",
            "LastError": {"nested": math.nan},
            "Run": "x",
            "CurrentAttempt": 10**100,
        },
    ]
    for body in bodies:
        for kind in ("function_job", "net_operation_build", "workspace_ui_build"):
            verdict = interpret(kind, body, JOB_ENUMS if kind == "function_job" else NET_ENUMS)
            assert isinstance(verdict, Verdict)
            assert verdict.anomaly != "uninterpretable"
