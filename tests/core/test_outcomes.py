"""Every status of every kind, read from the simulator and reported through the API."""

from __future__ import annotations

import pytest

from tests.core.conftest import Api

Q, L = {"after_s": 0, "status": "Queued"}, {"after_s": 0.05, "status": "Leased"}


async def test_completed_job_with_evidence_succeeds(api: Api) -> None:
    rid = await api.script(
        "function_job",
        [
            Q,
            L,
            {
                "after_s": 0.15,
                "status": "Completed",
                "run": {"Status": "Success", "ResultSummary": "3 invoices", "ResultData": {"n": 3}},
            },
        ],
    )
    t = await api.track(kind="function_job", remote_id=rid)
    done = await api.wait_terminal(t["tracking_id"])
    assert done["outcome"] == "succeeded"
    assert done["remote_status"] == "Completed"
    assert done["result"]["result_summary"] == "3 invoices"
    assert done["result"]["result_data"] == {"n": 3}
    assert done["result"]["run_status"] == "Success"
    assert isinstance(done["result"]["duration_ms"], int | float)
    assert done["remote"]["JobId"] == rid
    assert done["polls"] >= 1


async def test_skipped_run_is_success(api: Api) -> None:
    rid = await api.script(
        "function_job",
        [
            Q,
            {
                "after_s": 0.05,
                "status": "Completed",
                "run": {"Status": "Skipped", "ResultSummary": "nothing to do"},
            },
        ],
    )
    done = await api.wait_terminal(
        (await api.track(kind="function_job", remote_id=rid))["tracking_id"]
    )
    assert done["outcome"] == "succeeded"
    assert done["result"]["run_status"] == "Skipped"


async def test_failed_job_reports_last_error_and_run_error_summary(api: Api) -> None:
    rid = await api.script(
        "function_job",
        [
            Q,
            L,
            {
                "after_s": 0.1,
                "status": "Failed",
                "last_error": "Timeout calling ERP",
                "run": {"Status": "Failed", "ErrorSummary": "ErpTimeoutException"},
            },
        ],
    )
    done = await api.wait_terminal(
        (await api.track(kind="function_job", remote_id=rid))["tracking_id"]
    )
    assert done["outcome"] == "failed"
    assert done["result"]["last_error"] == "Timeout calling ERP"
    assert done["result"]["error_summary"] == "ErpTimeoutException"


async def test_cancelled_job(api: Api) -> None:
    rid = await api.script("function_job", [Q, {"after_s": 0.1, "status": "Cancelled"}])
    done = await api.wait_terminal(
        (await api.track(kind="function_job", remote_id=rid))["tracking_id"]
    )
    assert done["outcome"] == "cancelled"
    assert done["remote_status"] == "Cancelled"


async def test_retry_with_next_run_at_then_success_is_one_tracking(api: Api) -> None:
    rid = await api.script(
        "function_job",
        [
            Q,
            L,
            {
                "after_s": 0.1,
                "status": "Queued",
                "next_run_at_in_s": 0.3,
                "fields": {"WillRetry": True},
            },
            {"after_s": 0.45, "status": "Leased"},
            {"after_s": 0.55, "status": "Completed"},
        ],
    )
    done = await api.wait_terminal(
        (await api.track(kind="function_job", remote_id=rid))["tracking_id"]
    )
    assert done["outcome"] == "succeeded"


@pytest.mark.parametrize("kind", ["net_operation_build", "workspace_ui_build"])
async def test_build_succeeds_with_kind_by_name(api: Api, kind: str) -> None:
    rid = await api.script(
        kind,
        [
            {"after_s": 0, "status": "Queued"},
            {"after_s": 0.05, "status": "Running"},
            {"after_s": 0.1, "status": "Succeeded"},
        ],
        build_kind="Check",
    )
    done = await api.wait_terminal((await api.track(kind=kind, remote_id=rid))["tracking_id"])
    assert done["outcome"] == "succeeded"
    assert done["remote_status"] == "Succeeded"
    assert done["result"]["build_kind"] == "Check"


# ReasonCode -> the rest of its Failure object, as the platform sends each.
FAILURES = {
    "storage_capacity_exhausted": ("Storage", False, "53100", "free_or_expand_storage"),
    "publication_commit_unconfirmed": (
        "Publication",
        True,
        None,
        "verify_publication_then_resubmit",
    ),
    "compilation_failed": ("Compilation", False, None, "fix_compilation_errors"),
    "a_code_from_a_later_release": ("Other", False, None, "contact_support"),
}


def build_failures(text: str, kind: str, code: str) -> float:
    line = (
        f'orchestrator_build_failures_total{{kind="{kind}",reason_code="{code}",'
        'workspace="default"} '
    )
    [value] = [row.removeprefix(line) for row in text.splitlines() if row.startswith(line)]
    return float(value)


@pytest.mark.parametrize(
    ("reason", "label"),
    [
        ("storage_capacity_exhausted", "storage_capacity_exhausted"),
        ("publication_commit_unconfirmed", "publication_commit_unconfirmed"),
        ("compilation_failed", "compilation_failed"),
        ("a_code_from_a_later_release", "other"),  # bounded: unknown codes are "other"
    ],
)
async def test_net_operation_build_failure_reason_code(api: Api, reason: str, label: str) -> None:
    category, retryable, sql_state, remediation = FAILURES[reason]
    failure = {
        "ReasonCode": reason,
        "Category": category,
        "Retryable": retryable,
        "SqlState": sql_state,
        "SafeTarget": "project_artifacts",
        "RemediationCode": remediation,
        "Summary": "texte localisé",
    }
    rid = await api.script(
        "net_operation_build",
        [
            {"after_s": 0, "status": "Running"},
            {"after_s": 0.1, "status": "Failed", "failure": failure},
        ],
    )
    done = await api.wait_terminal(
        (await api.track(kind="net_operation_build", remote_id=rid))["tracking_id"]
    )
    assert done["outcome"] == "failed"
    assert done["result"]["failure"]["reason_code"] == reason
    assert done["result"]["failure"]["sql_state"] == sql_state
    assert done["result"]["failure"]["remediation_code"] == remediation
    text = await api.metrics_text()
    assert build_failures(text, "net_operation_build", label) == 1.0
    others = {"storage_capacity_exhausted", "publication_commit_unconfirmed", "other"} - {label}
    assert all(build_failures(text, "net_operation_build", c) == 0.0 for c in others)


async def test_ui_build_failure_and_cancel(api: Api) -> None:
    failed = await api.script(
        "workspace_ui_build",
        [{"after_s": 0, "status": "Running"}, {"after_s": 0.05, "status": "Failed"}],
    )
    cancelled = await api.script(
        "workspace_ui_build",
        [{"after_s": 0, "status": "Queued"}, {"after_s": 0.05, "status": "Cancelled"}],
    )
    a = await api.track(kind="workspace_ui_build", remote_id=failed)
    b = await api.track(kind="workspace_ui_build", remote_id=cancelled)
    assert (await api.wait_terminal(a["tracking_id"]))["outcome"] == "failed"
    assert (await api.wait_terminal(b["tracking_id"]))["outcome"] == "cancelled"
    # A UI build fails without a Failure object: counted, as "other"; a cancel is no failure.
    text = await api.metrics_text()
    assert build_failures(text, "workspace_ui_build", "other") == 1.0
    assert build_failures(text, "workspace_ui_build", "storage_capacity_exhausted") == 0.0


async def test_completed_without_evidence_is_never_success(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    """Fail closed: keep polling, count the anomaly, log it once, end at the deadline."""
    rid = await api.script(
        "function_job",
        [
            Q,
            {
                "after_s": 0.05,
                "status": "Completed",
                "run": {"Status": "Success", "ResultSummary": ""},
            },
        ],
    )
    t = await api.track(kind="function_job", remote_id=rid, timeout_s=1.0)
    done = await api.wait_terminal(t["tracking_id"])
    assert done["outcome"] == "deadline_exceeded"
    assert done["result"]["last_remote_status"] == "Completed"
    # The result says why it never succeeded: which evidence was missing.
    assert done["result"]["failing_closed"] is True
    last = done["result"]["last_anomaly"]
    assert last["reason"] == "completed_without_evidence"
    assert last["missing_evidence"] == ["run.result_summary"]
    assert done["polls"] >= 3
    logged = [r for r in caplog.records if r.getMessage().startswith("contract anomaly")]
    assert len(logged) == 1
    fields = logged[0].fields  # type: ignore[attr-defined]
    assert fields["tracking_id"] == t["tracking_id"] and fields["remote_id"] == rid
    assert fields["reason"] == "completed_without_evidence"
    text = await api.metrics_text()
    assert (
        'orchestrator_contract_anomalies_total{kind="function_job",reason="completed_without_evidence",workspace="default"}'
        in text
    )


async def test_anomaly_then_evidence_succeeds(api: Api) -> None:
    rid = await api.script(
        "function_job",
        [
            Q,
            {"after_s": 0.05, "status": "Completed", "fields": {"Run": None}},
            {"after_s": 0.5, "status": "Completed"},
        ],
    )
    done = await api.wait_terminal(
        (await api.track(kind="function_job", remote_id=rid))["tracking_id"]
    )
    assert done["outcome"] == "succeeded"


async def test_enqueue_response_and_camel_case_enums_as_names(api: Api) -> None:
    status, _ = await api.sim(
        "PUT",
        "/_sim/profile",
        {"job": {"pickup_s": 0.05, "duration_s": 0.1, "sequence": ["success"]}},
    )
    assert status == 200
    await api.sim("PUT", "/_sim/settings", {"camel_case": True, "enums_as_names": True})
    status, body = await api.sim(
        "POST", "/api/workspace/functions/billing.sync-invoices/enqueue", {}
    )
    assert status == 200, body
    # The wire really is camelCase with enum names: nothing here is PascalCase or a number.
    assert "Data" not in body and body["data"]["status"] == "Queued"
    t = await api.track(kind="function_job", enqueue_response=body, timeout_s=20)
    done = await api.wait_terminal(t["tracking_id"])
    assert done["remote_id"] == body["data"]["jobId"]
    # Read through names and camelCase the job succeeds on its run's evidence.
    assert done["outcome"] == "succeeded", done["result"]
    assert done["remote_status"] == "Completed"
    assert done["result"]["run_status"] == "Success"
    assert done["result"]["result_summary"] == done["remote"]["run"]["resultSummary"]
    assert done["result"]["run_id"] == done["remote"]["run"]["runId"]
