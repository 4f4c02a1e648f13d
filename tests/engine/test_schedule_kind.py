"""The schedule kind on virtual time: evidence, and the work a stopped schedule leaves."""

from __future__ import annotations

import asyncio
from typing import Any

from orchestrator.clock import iso
from tests.engine.harness import EPOCH, Answer, Rig, body, rig, run

SCHEDULE = "/api/workspace/admin/function-schedules/S-1"
JOBS = "/api/workspace/admin/function-operations/jobs"
RUNS = "/api/workspace/admin/function-operations/runs"
OCCURRENCE = "com.moltaro.orchestrator.tracking.occurrence"


def at(t: float) -> str | None:
    return iso(EPOCH + t)


def schedule(status: str = "Enabled", active: str | None = None) -> dict[str, Any]:
    return {
        "ScheduleId": "S-1",
        "Status": status,
        "NextRunAt": None,
        "LastStatus": None,
        "TargetHealth": "Healthy",
        "ActiveJobId": active,
    }


def job(job_id: str, status: str, created: float = 1.0) -> dict[str, Any]:
    return {"JobId": job_id, "Status": status, "CreatedAt": at(created), "Source": "Schedule"}


def a_run(job_id: str, status: str, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "RunId": f"R-{job_id}",
        "JobId": job_id,
        "Attempt": 1,
        "Status": status,
        "StartedAt": at(1.5),
        "CompletedAt": None,
        "DurationMs": None,
        "ResultSummary": None,
    }
    if status != "Running":
        out.update(CompletedAt=at(2.0), DurationMs=500, ResultSummary="synced 3 invoices")
    out.update(fields)
    return out


def page(*rows: dict[str, Any]) -> Answer:
    return body(200, {"Items": list(rows), "Total": len(rows)})


async def occurrence_events(r: Rig) -> list[dict[str, Any]]:
    return [e for e in await r.events() if e["type"] == OCCURRENCE]


def test_a_completed_occurrence_without_evidence_is_counted_not_reported() -> None:
    async def main() -> None:
        r = await rig()
        r.transport.script(SCHEDULE, body(200, schedule()))
        r.transport.script(JOBS, page(job("J-1", "Completed")))
        missing = a_run("J-1", "Success", ResultSummary="")
        r.transport.script(
            RUNS, lambda now: page(missing) if now < 30 else page(a_run("J-1", "Success"))
        )
        t = await r.track("schedule", "S-1")
        await asyncio.sleep(25)
        assert await occurrence_events(r) == []
        anomalies = r.engine.metrics.contract_anomalies_total.labels(
            workspace="default", kind="schedule", reason="completed_without_evidence"
        )
        assert anomalies._value.get() >= 3  # counted on every read of it
        await asyncio.sleep(40)  # the evidence arrives at 30 s: reported, once
        [reported] = await occurrence_events(r)
        assert reported["data"]["occurrence"]["job_id"] == "J-1"
        assert reported["data"]["occurrence"]["result_summary"] == "synced 3 invoices"
        stored = await r.store.get_tracking(t.tracking_id)
        assert stored is not None and stored.state == "active"
        await r.close()

    run(main)


def test_a_disabled_schedule_ends_after_the_job_it_had_created() -> None:
    async def main() -> None:
        r = await rig()

        def sched(now: float) -> Answer:
            return body(200, schedule("Enabled" if now < 5 else "Disabled", "J-1"))

        r.transport.script(SCHEDULE, sched)
        r.transport.script(
            JOBS, lambda now: page(job("J-1", "Leased" if now < 40 else "Completed"))
        )
        r.transport.script(
            RUNS, lambda now: page(a_run("J-1", "Running" if now < 40 else "Success"))
        )
        t = await r.track("schedule", "S-1")
        final = await r.final(t.tracking_id)
        assert final.outcome == "cancelled"
        assert final.result is not None and final.result["reason"] == "schedule_disabled"
        assert final.result["occurrences_reported"] == 1
        assert final.terminal_at is not None and final.terminal_at >= EPOCH + 40
        types = [e["type"] for e in await r.events()]
        assert types == [OCCURRENCE, "com.moltaro.orchestrator.tracking.cancelled"]
        [reported] = await occurrence_events(r)
        assert reported["data"]["occurrence"]["job_status"] == "Completed"
        await r.close()

    run(main)


def test_a_deleted_schedule_follows_its_older_job_to_the_end_then_ends_not_found() -> None:
    async def main() -> None:
        r = await rig()
        old = "/api/workspace/admin/function-operations/jobs/J-0"

        def sched(now: float) -> Answer:
            if now < 3:
                return body(200, schedule("Enabled", "J-0"))
            return body(404, {"title": "Not Found"})

        def older(now: float) -> Answer:
            if now < 30:
                return body(200, {**job("J-0", "Leased", created=-100.0), "Run": None})
            failed = a_run("J-0", "Failed", ErrorSummary="ledger 502")
            return body(200, {**job("J-0", "Failed", created=-100.0), "Run": failed})

        r.transport.script(SCHEDULE, sched)
        r.transport.script(JOBS, page())  # created before the tracking: not listed
        r.transport.script(RUNS, page())
        r.transport.script(old, older)
        t = await r.track("schedule", "S-1")
        final = await r.final(t.tracking_id)
        assert final.outcome == "not_found"
        assert final.result is not None and final.result["reason"] == "schedule_deleted"
        assert final.result["confirmations"] >= 3
        assert final.terminal_at is not None and final.terminal_at >= EPOCH + 30
        [reported] = await occurrence_events(r)
        occurrence = reported["data"]["occurrence"]
        assert (occurrence["job_id"], occurrence["job_status"]) == ("J-0", "Failed")
        assert occurrence["error_summary"] == "ledger 502"
        reads_of_old = r.transport.count(old, "GET")
        await asyncio.sleep(60)  # ended: nothing is read any more
        assert r.transport.count(old, "GET") == reads_of_old
        await r.close()

    run(main)


def test_a_schedules_deadline_while_an_occurrence_lacks_evidence_says_which() -> None:
    async def main() -> None:
        r = await rig()
        r.transport.script(SCHEDULE, body(200, schedule()))
        r.transport.script(JOBS, page(job("J-1", "Completed")))
        r.transport.script(RUNS, page(a_run("J-1", "Success", DurationMs=None)))
        t = await r.track("schedule", "S-1", deadline_s=20)
        final = await r.final(t.tracking_id)
        assert final.outcome == "deadline_exceeded" and final.result is not None
        assert final.result["failing_closed"] is True
        last = final.result["last_anomaly"]
        assert (last["job_id"], last["missing_evidence"]) == ("J-1", ["run.duration_ms"])
        assert final.result["active_occurrences"][0]["missing_evidence"] == ["run.duration_ms"]
        await r.close()

    run(main)
