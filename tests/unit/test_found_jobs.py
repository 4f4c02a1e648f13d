"""Work found by filter, judged from its jobs and runs: pure."""

from __future__ import annotations

from typing import Any

from orchestrator.interpret import Phase, fallback_enums
from orchestrator.platform.found_jobs import (
    FoundJob,
    FoundState,
    adopt_rows,
    judge_all,
    list_filters,
)
from orchestrator.workfilter import WorkFilter

ENUMS = fallback_enums("function_job")
T0 = 1_800_000_000.0
SINCE = "2027-01-15T08:00:00.000Z"


def state(expect: int = 1, **work: str) -> FoundState:
    return FoundState(WorkFilter(**work), T0, expect)


def run(job_id: str, attempt: int, status: str, **extra: Any) -> dict[str, Any]:
    # Run statuses by name: the fallback enums resolve no integer run status.
    done = status != "Running"
    return {
        "RunId": f"run-{job_id}-{attempt}", "JobId": job_id, "Attempt": attempt, "Status": status,
        "StartedAt": "2027-01-15T08:00:01.000Z",
        "CompletedAt": "2027-01-15T08:00:02.000Z" if done else None,
        "DurationMs": 1000 if done else None,
        "ResultSummary": "Processed 3 records" if status == "Success" else None,
        "ErrorSummary": "boom" if status == "Failed" else None,
        **extra,
    }  # fmt: skip


def job(job_id: str, status: int, **extra: Any) -> dict[str, Any]:
    return {
        "JobId": job_id, "Status": status, "CreatedAt": "2027-01-15T08:00:00.500Z",
        "BusinessFunctionId": "fn-x", "TriggerBindingId": "b1", "EntityId": "e1",
        "CorrelationId": "c-1", "CurrentAttempt": 1, **extra,
    }  # fmt: skip


def test_the_list_query_names_only_what_was_given() -> None:
    s = state(trigger_binding_id="b1", filter_correlation_id="c-1")
    assert list_filters(s) == {"trigger_binding_id": "b1", "search": "c-1", "from": SINCE}


def test_rows_a_filter_excludes_are_kept_out_and_reported() -> None:
    s = state(expect=2, trigger_binding_id="b1", entity_id="e1", filter_correlation_id="c-1")
    rows = [
        job("j-other-binding", 0, TriggerBindingId="b2"),
        job("j-other-record", 0, EntityId="e2"),
        job("j-too-old", 0, CreatedAt="2027-01-15T07:00:00.000Z"),
        job("j-search-only", 0, CorrelationId="c-10"),  # a search hit, not a broken filter
        job("j-late", 0, CreatedAt="2027-01-15T08:00:09.000Z"),
        job("j-early", 0, CreatedAt="2027-01-15T08:00:03.000Z"),
        job("j-third", 0, CreatedAt="2027-01-15T08:00:30.000Z"),
    ]
    ignored = adopt_rows(s, rows)
    assert sorted(ignored) == ["CreatedAt", "EntityId", "TriggerBindingId"]
    assert [j.job_id for j in s.jobs] == ["j-early", "j-late"]  # the oldest two matches
    assert adopt_rows(s, rows) == ["TriggerBindingId", "EntityId", "CreatedAt"]
    assert [j.job_id for j in s.jobs] == ["j-early", "j-late"]


def test_a_completed_job_needs_its_runs_read_and_their_evidence() -> None:
    s = state(trigger_binding_id="b1", entity_id="e1")
    s.jobs = [FoundJob("j1", job("j1", 2, Run=None))]
    judged = judge_all(s, ENUMS)
    assert judged.phase is Phase.ANOMALY and judged.anomaly == "completed_without_evidence"
    s.jobs[0].runs = [run("j1", 1, "Success", ResultSummary=None)]
    assert judge_all(s, ENUMS).phase is Phase.ANOMALY  # fail closed
    s.jobs[0].runs = [run("j1", 1, "Success")]
    judged = judge_all(s, ENUMS)
    assert judged.phase is Phase.SUCCEEDED
    [entry] = judged.summary["jobs"]
    assert entry["run_status"] == "Success" and entry["result_summary"] == "Processed 3 records"


def test_the_last_run_decides_and_every_run_counts() -> None:
    s = state(trigger_binding_id="b1", entity_id="e1")
    embedded = run("j1", 1, "Failed")  # a stale Run in the body: the runs read wins
    s.jobs = [
        FoundJob(
            "j1", job("j1", 2, Run=embedded), [run("j1", 2, "Success"), run("j1", 1, "Failed")]
        )
    ]
    judged = judge_all(s, ENUMS)
    assert judged.phase is Phase.SUCCEEDED
    [entry] = judged.summary["jobs"]
    assert entry["attempts"] == 2 and entry["run_id"] == "run-j1-2"


def test_outcome_rules_and_what_the_deadline_says() -> None:
    s = state(expect=2, trigger_binding_id="b1", entity_id="e1")
    assert judge_all(s, ENUMS).summary["detail"] == f"no matching job seen since {SINCE}"
    s.jobs = [FoundJob("j1", job("j1", 1))]
    judged = judge_all(s, ENUMS)
    assert judged.phase is Phase.PENDING and judged.remote_status == "Leased"
    assert (
        judged.summary["detail"] == f"job j1 still Leased; 1 of 2 expected jobs seen since {SINCE}"
    )
    s.jobs = [
        FoundJob("j1", job("j1", 3, LastError="bad"), [run("j1", 1, "Failed")]),
        FoundJob("j2", job("j2", 4), []),
    ]
    judged = judge_all(s, ENUMS)
    assert judged.phase is Phase.FAILED
    assert judged.summary["seen"] == {"matched": 2, "expected": 2}
    assert judged.summary["jobs"][0]["error_summary"] == "boom"
    s.jobs[0] = FoundJob("j1", job("j1", 2), [run("j1", 1, "Success")])
    assert judge_all(s, ENUMS).phase is Phase.CANCELLED
    done = job("j2", 2, Run=run("j2", 1, "Success"))
    s.jobs[1] = FoundJob("j2", done, None)  # terminal, runs not read yet
    judged = judge_all(s, ENUMS)
    assert judged.phase is Phase.PENDING
    assert judged.summary["detail"] == "job j2 Completed, its runs not read yet"


def test_state_survives_its_json_and_the_key_names_the_filter() -> None:
    s = state(expect=3, action_id="a1", entity_id="e1")
    s.jobs = [FoundJob("j1", job("j1", 0))]
    back = FoundState.from_json(s.to_json(), WorkFilter().key(), 0.0)
    assert back is not None and back.to_json() == s.to_json()
    key = WorkFilter(action_id="a1", entity_id="e1").key()
    assert key == 'filter:{"action_id":"a1","entity_id":"e1","since":null}'
    assert WorkFilter.from_key(key) == WorkFilter(action_id="a1", entity_id="e1")
    by_job = FoundState.from_json(None, WorkFilter(job_id="J9").key(), T0)
    assert by_job is not None and [j.job_id for j in by_job.jobs] == ["J9"]
    assert by_job.since is None and not by_job.listing
