"""Adaptive polling of a schedule's occurrences, on virtual time against the fake transport.

An occurrence is a function job of the schedule's target: the durations of those that
end teach that function's class (the class a ``function_job`` of it has), and a later
occurrence's reads while it runs are planned by it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from orchestrator.clock import iso
from orchestrator.store.base import NewTracking
from orchestrator.vocabulary import NextPollReason
from tests.engine.harness import EPOCH, Answer, Rig, body, rig, run

SCHEDULE = "/api/workspace/admin/function-schedules/S-1"
JOBS = "/api/workspace/admin/function-operations/jobs"
RUNS = "/api/workspace/admin/function-operations/runs"
FIRST, EVERY, RUNS_S = 5.0, 20.0, 6.0  # occurrences at 5, 25, 45, ... each running 6 s
KEY = "ops.tick"
POLLING: dict[str, Any] = {
    "initial_delay_s": 0.5, "max_delay_s": 8.0, "adaptive": {"min_samples": 3},
}  # fmt: skip


def at(t: float) -> str | None:
    return iso(EPOCH + t)


def dues(now: float) -> list[float]:
    """The instants of the occurrences due by ``now``."""
    return (
        [FIRST + EVERY * k for k in range(int((now - FIRST) // EVERY) + 1)] if now >= FIRST else []
    )


def schedule_body(now: float) -> dict[str, Any]:
    done = dues(now)
    running = done and now < done[-1] + RUNS_S
    return {
        "ScheduleId": "S-1", "FunctionKey": KEY, "Status": "Enabled",
        "NextRunAt": at(FIRST + EVERY * len(done)), "LastStatus": None,
        "TargetHealth": "Healthy", "ActiveJobId": f"J-{len(done) - 1}" if running else None,
    }  # fmt: skip


def jobs_page(now: float) -> Answer:
    rows = [
        {"JobId": f"J-{k}", "FunctionKey": KEY, "Source": "Schedule", "CreatedAt": at(due),
         "Status": "Completed" if now >= due + RUNS_S else "Leased"}
        for k, due in enumerate(dues(now))
    ]  # fmt: skip
    return body(200, {"Items": rows, "Total": len(rows)})


def runs_page(now: float) -> Answer:
    rows = []
    for k, due in enumerate(dues(now)):
        ended = now >= due + RUNS_S
        rows.append(
            {"RunId": f"R-{k}", "JobId": f"J-{k}", "Attempt": 1, "StartedAt": at(due + 0.1),
             "Status": "Success" if ended else "Running",
             "CompletedAt": at(due + RUNS_S) if ended else None,
             "DurationMs": 5900 if ended else None, "ResultSummary": "ticked" if ended else None}
        )  # fmt: skip
    return body(200, {"Items": rows, "Total": len(rows)})


def script(r: Rig) -> None:
    r.transport.script(SCHEDULE, lambda now: body(200, schedule_body(now)))
    r.transport.script(JOBS, jobs_page)
    r.transport.script(RUNS, runs_page)


def reads_to_see_end(r: Rig, due: float) -> tuple[int, float]:
    """Schedule reads from an occurrence's due time to the first one at or after its
    end (that one included), and how long after the end that one came."""
    reads = [t for t, _, p in r.transport.log if p == SCHEDULE and t >= due]
    ended = due + RUNS_S
    seen = next(t for t in reads if t >= ended)
    return sum(1 for t in reads if t <= seen), seen - ended


def test_ended_occurrences_teach_the_function_and_plan_a_later_one() -> None:
    async def main() -> None:
        r = await rig(**POLLING)
        script(r)
        t = await r.track("schedule", "S-1")
        reasons: list[tuple[float, NextPollReason]] = []
        for _ in range(int(FIRST + EVERY * 5) * 10):  # five occurrences, sampled each 0.1 s
            await asyncio.sleep(0.1)
            reasons.append((r.clock.monotonic(), r.engine.entries[t.tracking_id].reason))
        # Learned as function jobs of the target, from the occurrences' own times.
        sketch = r.engine.learner.shown["default", "function_job", KEY]  # what /metrics shows
        assert sketch.count == 5
        assert abs(sketch.quantile(0.5) - RUNS_S) < 0.6
        # Learning (the first three): the backoff reads each running occurrence several
        # times. Learned: the read just after the due time, then the planner's, once the
        # occurrence has likely ended.
        per = [reads_to_see_end(r, due) for due in dues(FIRST + EVERY * 4)]
        assert min(n for n, _ in per[:3]) >= 4, per
        assert [n for n, _ in per[3:]] == [2, 2], per
        assert all(late <= 2.0 for _, late in per[3:]), per  # detection_target_s is 1.0
        planned = {
            round(due) for due in dues(FIRST + EVERY * 4)
            for when, reason in reasons
            if reason is NextPollReason.ADAPTIVE and due < when < due + RUNS_S
        }  # fmt: skip
        assert planned == {round(FIRST + EVERY * 3), round(FIRST + EVERY * 4)}
        # Between occurrences the next read is still NextRunAt's.
        assert any(
            reason is NextPollReason.NEXT_RUN_AT and when > FIRST + EVERY * 4 + RUNS_S + 1
            for when, reason in reasons
        )
        # A function job of the same function is planned from the same class at once.
        now = r.clock.now()
        item = NewTracking("trk_fn", "default", "function_job", "J-api", now + 600, now, now)
        r.transport.script(
            "/api/workspace/functions/jobs/J-api",
            body(200, {"JobId": "J-api", "FunctionKey": KEY, "Status": "Leased",
                       "CreatedAt": iso(now)}),
        )  # fmt: skip
        [(tracking, _)] = await r.store.create_trackings([item])
        r.engine.add(tracking, KEY)
        assert r.engine.live(tracking).next_poll_reason == NextPollReason.ADAPTIVE
        await r.close()

    run(main)


def test_without_enough_samples_a_running_occurrence_is_read_by_the_backoff() -> None:
    async def main() -> None:
        r = await rig(**{**POLLING, "adaptive": {"min_samples": 50}})
        script(r)
        t = await r.track("schedule", "S-1")
        seen = set()
        for _ in range(int(FIRST + EVERY * 3) * 10):
            await asyncio.sleep(0.1)
            seen.add(r.engine.entries[t.tracking_id].reason)
        assert NextPollReason.ADAPTIVE not in seen
        assert r.engine.learner.shown["default", "function_job", KEY].count == 3
        await r.close()

    run(main)
