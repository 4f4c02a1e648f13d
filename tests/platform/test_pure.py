"""The pure parts: the execution-model join, catalog enums, occurrence scanning."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.config import WorkspacePaths
from orchestrator.interpret._read import enum_name, list_items
from orchestrator.interpret.enums import (
    BINDING_SOURCE,
    CONTRACT,
    PUBLICATION_KIND,
    resolve_platform_enums,
)
from orchestrator.interpret.enums import CATALOG_DOCUMENTED as DOCUMENTED
from orchestrator.interpret.enums import catalog_fallback as fallback
from orchestrator.platform.execution_model import CatalogSnapshot, explain
from orchestrator.platform.occurrences import FollowState, mark, scan, settle
from orchestrator.platform.run_history import attempts_from_runs
from orchestrator.platform.stop_retries import RetryStopper, stop_accepted
from orchestrator.simulator.openapi import build_document

ENUMS = {n: fallback(n, "test") for n in (CONTRACT, PUBLICATION_KIND, BINDING_SOURCE)}
C = {name: value for value, name in DOCUMENTED[CONTRACT].items()}


def fn(key: str, contract: Any, scope: str = "Global", fid: str | None = None) -> dict[str, Any]:
    return {
        "BusinessFunctionId": fid or f"fn-{key}",
        "FunctionKey": key,
        "Name": key,
        "Scope": scope,
        "CurrentPublishedContract": contract,
        "Revision": 1,
    }


def pub(key: str, kind: Any, enabled: bool = True, retired: bool = False) -> dict[str, Any]:
    return {
        "BusinessFunctionId": f"fn-{key}",
        "FunctionKey": key,
        "Kind": kind,
        "IsEnabled": enabled,
        "IsRetired": retired,
    }


def binding(key: str, source: Any) -> dict[str, Any]:
    return {"BindingId": f"b-{key}", "BusinessFunctionId": f"fn-{key}", "Source": source}


def sched(key: str, health: str = "Healthy", status: str = "Enabled") -> dict[str, Any]:
    return {
        "ScheduleId": f"s-{key}",
        "BusinessFunctionId": f"fn-{key}",
        "Status": status,
        "NextRunAt": "2030-01-01T00:00:00.000Z",
        "TargetHealth": health,
    }


def answer(key: str, *, fns: Any = (), pubs: Any = (), binds: Any = (), scheds: Any = ()) -> Any:
    snap = CatalogSnapshot(list(fns), list(binds), list(pubs), list(scheds), ENUMS)
    return explain(key, snap)


def codes(a: dict[str, Any]) -> set[str]:
    return {f["code"] for f in a["contradictions"]}


@pytest.mark.parametrize(
    ("contract", "pubs", "binds", "scheds", "surfaces"),
    [
        ("Validation", [], [0], [], ["entity_save"]),
        ("BeforeSaveMutation", [], [0], [], ["entity_save"]),
        ("Command", [0], [], [], ["command"]),
        ("HttpEndpoint", [], [], [], ["http_endpoint"]),
        ("Job", [1], [], [], ["global_job_api"]),
        ("Job", [], [], [True], ["function_schedule"]),
        ("Job", [1], [], [True], ["global_job_api", "function_schedule"]),
        ("Job", [], [], [], ["job_unpublished"]),
        ("TriggerHandler", [], [1], [], ["entity_trigger"]),
        ("Action", [], [], [], ["action"]),
        ("Job", [1], [1], [], ["global_job_api", "entity_trigger"]),
    ],
)
def test_rows(contract: str, pubs: Any, binds: Any, scheds: Any, surfaces: list[str]) -> None:
    a = answer(
        "k",
        fns=[fn("k", C[contract])],
        pubs=[pub("k", kind) for kind in pubs],
        binds=[binding("k", s) for s in binds],
        scheds=[sched("k") for _ in scheds],
    )
    assert [r["surface"] for r in a["rows"]] == surfaces
    assert codes(a) == set()
    assert a["contract"] == contract


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"fns": [fn("k", 7)], "scheds": [sched("k")]}, {"schedule_target_not_global_job"}),
        (
            {"fns": [fn("k", 3, "Entity")], "scheds": [sched("k")]},
            {"schedule_target_not_global_job"},
        ),
        (
            {"fns": [fn("k", 3)], "scheds": [sched("k", "InvalidTarget")]},
            {"schedule_target_unhealthy"},
        ),
        (
            {"fns": [fn("k", 3)], "scheds": [{**sched("k"), "NextRunAt": None}]},
            {"enabled_schedule_without_next_run"},
        ),
        ({"fns": [fn("k", 7)], "pubs": [pub("k", 1)]}, {"enqueue_publication_on_non_job_contract"}),
        (
            {"fns": [fn("k", 3)], "pubs": [pub("k", 0)]},
            {"command_publication_on_non_command_contract"},
        ),
        ({"fns": [fn("k", 3)], "pubs": [pub("k", 1, retired=True)]}, {"key_retired"}),
        ({"fns": [fn("k", 3)], "pubs": [pub("k", 1, enabled=False)]}, {"key_disabled"}),
        ({"fns": [fn("k", 3)], "pubs": [pub("k", 1), pub("k", 1)]}, {"several_publications"}),
        (
            {"fns": [fn("k", 3)], "binds": [binding("k", 0)]},
            {"entity_save_binding_on_non_save_contract"},
        ),
        ({"fns": [fn("k", 0)]}, {"save_contract_without_entity_save_binding"}),
        ({"fns": [fn("k", 5)]}, {"trigger_handler_without_trigger_binding"}),
        ({"fns": [fn("k", 4)]}, {"unknown_enum_value"}),
        ({"fns": [fn("k", None)]}, {"no_published_contract"}),
        ({"fns": [fn("k", 3)], "pubs": [pub("k", 9)]}, {"unknown_enum_value"}),
    ],
)
def test_contradictions(kwargs: dict[str, Any], expected: set[str]) -> None:
    assert codes(answer("k", **kwargs)) == expected


def test_callable_and_names_on_the_wire() -> None:
    a = answer(
        "K",
        fns=[{k.lower(): v for k, v in fn("k", "job").items()}],
        pubs=[{**pub("k", "ENQUEUE"), "FunctionKey": "k"}],
    )
    assert a["surface"] == "global_job_api" and a["callable"] is True
    assert a["publication"]["kind"] == "Enqueue" and a["contract"] == "Job"
    assert answer("nothing", fns=[fn("k", 3)]) is None
    assert answer("k", fns=[fn("k", 3)])["callable"] is False  # no publication


def test_join_is_by_business_function_id() -> None:
    other = {**pub("k", 1), "BusinessFunctionId": "fn-other"}
    a = answer(
        "k", fns=[fn("k", 3)], pubs=[other], scheds=[{**sched("k"), "BusinessFunctionId": "x"}]
    )
    assert a["publication"] is None and a["schedules"] == []


def test_enums_from_the_routes_schemas_and_fallback() -> None:
    paths = WorkspacePaths().model_dump()
    doc = build_document()
    found = resolve_platform_enums(doc, paths)
    assert all(e.source == "openapi" for e in found.values())
    assert dict(found[CONTRACT].values) == DOCUMENTED[CONTRACT]
    # Renumber the component: the answer follows the document, not the documentation.
    doc["components"]["schemas"]["BusinessFunctionContract"]["enum"] = [10, 11, 12, 13, 15, 16, 17]
    assert resolve_platform_enums(doc, paths)[CONTRACT].values[13] == "Job"
    # A route that is not in the document falls back, saying why.
    moved = resolve_platform_enums(doc, {**paths, "api_functions": "/elsewhere"})
    assert moved[PUBLICATION_KIND].source == "fallback"
    assert "elsewhere" in (moved[PUBLICATION_KIND].reason or "")
    none = resolve_platform_enums(None, paths, "GET /swagger failed: 500")
    assert none[BINDING_SOURCE].to_json()["fallback_reason"] == "GET /swagger failed: 500"


def test_wire_readers() -> None:
    assert enum_name(3, {3: "Job"}) == "Job"
    assert enum_name("3", {3: "Job"}) == "Job"
    assert enum_name("job", {3: "Job"}) == "Job"
    assert enum_name("Future", {3: "Job"}) == "Future"
    assert enum_name(9, {3: "Job"}) is None
    assert enum_name(True, {1: "Job"}) is None
    assert list_items({"items": [{"a": 1}, 2]}) == [{"a": 1}]
    assert list_items([{"a": 1}]) == [{"a": 1}]
    assert list_items({"Total": 0}) is None


JOB = {0: "Queued", 1: "Leased", 2: "Completed", 3: "Failed", 4: "Cancelled"}
RUN = {0: "Running", 1: "Success", 2: "Failed", 3: "Skipped", 4: "Cancelled", 5: "TimedOut"}


def job(jid: str, status: int, at: str, **extra: Any) -> dict[str, Any]:
    return {"JobId": jid, "Status": status, "CreatedAt": at, **extra}


def run(
    rid: str, jid: str | None, status: int, attempt: int, at: str, **extra: Any
) -> dict[str, Any]:
    """A run row; a finished one carries the evidence the platform promises for it."""
    done = status != 0
    return {
        "RunId": rid,
        "JobId": jid,
        "Status": status,
        "Attempt": attempt,
        "StartedAt": at,
        "CompletedAt": at if done else None,
        "DurationMs": 5 if done else None,
        "ResultSummary": "synced 3 invoices" if status in (1, 3) else None,
        **extra,
    }


T0 = "2030-01-01T00:00:00.000Z"
T1 = "2030-01-01T00:00:01.000Z"
T2 = "2030-01-01T00:00:02.000Z"


def test_scan_finished_pending_and_skipped() -> None:
    state = FollowState(since=0.0)
    jobs = [
        job("j1", 2, T0),  # Completed with its run's evidence
        job("j2", 1, T2),  # Leased: pending
        job("j3", 2, T1),  # Completed but its run is still Running: not evidence
    ]
    runs = [
        run("r1", "j1", 1, 1, T0),
        run("r2", "j2", 0, 1, T2),
        run("r3", "j3", 0, 1, T1),
        run("s1", None, 3, 0, T1, ResultData={"ActiveJobId": "j1"}),
    ]
    result = scan(state, jobs, runs, JOB, RUN)
    assert [o["key"] for o in result.finished] == ["job:j1", "run:s1"]
    assert [o["key"] for o in result.pending] == ["job:j3", "job:j2"]
    assert result.finished[1]["active_job_id"] == "j1"
    for o in result.finished:
        mark(state, o)
    assert state.count == 2
    again = scan(state, jobs, runs, JOB, RUN)
    assert again.finished == []  # nothing twice
    settle(state, again)
    assert state.since <= again.pending[0]["at"]  # never past an unfinished occurrence


@pytest.mark.parametrize(
    ("gap", "missing"),
    [
        ({"DurationMs": None}, ["run.duration_ms"]),
        ({"ResultSummary": ""}, ["run.result_summary"]),
        ({"ResultSummary": None, "CompletedAt": None}, ["run.completed_at", "run.result_summary"]),
        ({"Status": 2}, ["run.status"]),
    ],
)
def test_completed_occurrence_without_run_evidence_stays_pending(
    gap: dict[str, Any], missing: list[str]
) -> None:
    state = FollowState(since=0.0)
    result = scan(state, [job("j1", 2, T0)], [run("r1", "j1", 1, 1, T0, **gap)], JOB, RUN)
    assert result.finished == []
    assert [o["key"] for o in result.pending] == ["job:j1"]
    assert [o["missing_evidence"] for o in result.anomalies] == [missing]


def test_completed_occurrence_with_its_evidence_is_no_anomaly() -> None:
    result = scan(FollowState(0.0), [job("j1", 2, T0)], [run("r1", "j1", 1, 1, T0)], JOB, RUN)
    assert [o["key"] for o in result.finished] == ["job:j1"]
    assert result.anomalies == [] and "missing_evidence" not in result.finished[0]


def test_scan_dates_each_job_occurrence_by_its_own_rows() -> None:
    t3, t9 = "2030-01-01T00:00:03.000Z", "2030-01-01T00:00:09.000Z"
    jobs = [
        job("j1", 2, T0, FunctionKey="ops.tick"),  # Completed: its run's CompletedAt
        job("j2", 4, T1, FunctionKey="ops.tick", ModifiedAt=t9),  # Cancelled, no run
        job("j3", 1, T2),  # Leased, no FunctionKey on the row
    ]
    runs = [run("r1", "j1", 1, 1, T0, CompletedAt=t3), run("r2", None, 3, 0, T1)]
    result = scan(FollowState(since=0.0), jobs, runs, JOB, RUN)
    base = 1_893_456_000.0  # T0
    times = {k: (t.function_key, t.created_at, t.ended_at) for k, t in result.times.items()}
    assert times == {
        "job:j1": ("ops.tick", base, base + 3),
        "job:j2": ("ops.tick", base + 1, base + 9),
        "job:j3": (None, base + 2, None),  # running: no end
    }  # a Skipped run is no job: no times
    assert all("times" not in o and "function_key" not in o for o in result.finished)


def test_scan_failed_retries_and_cancelled_without_run() -> None:
    state = FollowState(since=0.0)
    jobs = [job("j1", 3, T0, LastError="boom"), job("j2", 4, T1), job("j3", 0, T2)]
    runs = [run("a", "j1", 2, 1, T0), run("b", "j1", 5, 2, T1)]
    result = scan(state, jobs, runs, JOB, RUN)
    j1, j2 = result.finished
    assert (j1["attempt"], j1["attempts"], j1["run_status"]) == (2, 2, "TimedOut")
    assert j1["last_error"] == "boom"
    assert j2["run_id"] is None and j2["job_status"] == "Cancelled"
    assert [o["job_id"] for o in result.pending] == ["j3"]


def test_state_round_trip_and_watermark() -> None:
    state = FollowState(since=100.0)
    mark(state, {"key": "job:a", "at": 100.0, "finished": True})
    settle_scan = scan(state, [], [], JOB, RUN)
    settle(state, settle_scan)
    assert state.since == 100.0  # nothing newer seen: does not move
    restored = FollowState.from_json(state.to_json(), 0.0)
    assert restored.reported == {"job:a": 100.0} and restored.count == 1
    assert FollowState.from_json("junk", 5.0).since == 5.0
    # Far newer occurrences move it, keeping a margin; old keys are forgotten.
    newer = scan(
        state, [job("z", 2, "2030-01-01T00:00:00.000Z")], [run("r", "z", 1, 1, T0)], JOB, RUN
    )
    settle(state, newer)
    assert state.since > 100.0 and "job:a" not in state.reported


def test_an_occurrence_in_the_watermarks_millisecond_is_reported_once() -> None:
    # The tracking began 0.4 ms after a job was created on a whole second: the
    # query From the watermark (milliseconds, truncated) still returns the job.
    state = FollowState(since=1893456000.0004)
    rows = [job("j1", 2, "2030-01-01T00:00:00.000Z")], [run("r1", "j1", 1, 1, T0)]
    first = scan(state, *rows, JOB, RUN)
    assert [o["key"] for o in first.finished] == ["job:j1"]
    mark(state, first.finished[0])
    settle(state, first)
    for _ in range(3):
        again = scan(state, *rows, JOB, RUN)
        assert again.finished == []
        settle(state, again)
    assert state.count == 1


def test_attempts_keep_only_this_job_in_order() -> None:
    runs = [run("b", "j", 1, 2, T1), run("x", "other", 1, 1, T0), run("a", "j", 2, 1, T0)]
    attempts = attempts_from_runs("j", runs, RUN)
    assert [(a["run_id"], a["status"]) for a in attempts] == [("a", "Failed"), ("b", "Success")]


def test_stop_answers() -> None:
    assert stop_accepted({"CancellationReasonCode": "job.retry.stopRequested"})
    assert stop_accepted({"RetryStopState": "Requested"})
    assert not stop_accepted({"RetryStopState": "None"})
    stale = RetryStopper._refused({"Job": {"Status": 1, "ModifiedAt": T1}}, T0, JOB)
    assert stale.stale and stale.status == 409 and T1 in stale.detail
    done = RetryStopper._refused({"Job": {"Status": 2}}, T0, JOB)
    assert not done.stale and "terminal" in done.detail
    again = RetryStopper._refused({"Job": {"Status": 1, "RetryStopState": "Requested"}}, T0, JOB)
    assert again.status == 200
