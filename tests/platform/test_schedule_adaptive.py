"""Adaptive polling of a schedule's occurrences against the bundled simulator.

The occurrences that end teach the target function's class; a later occurrence,
while it runs, is read where the planner places the read (``next_poll_reason:
"adaptive"`` in the tracking resource).
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.platform.conftest import Api, StartService, occurrences, set_jobs, wait_for

KEY = "billing.sync-invoices"
SAMPLES = (
    f'orchestrator_work_duration_samples{{class="{KEY}",kind="function_job",workspace="default"}}'
)


async def test_a_later_occurrence_is_read_by_its_function_s_class(
    start_service: StartService,
) -> None:
    api: Api = await start_service(
        polling={"max_delay_s": 2.0, "adaptive": {"min_samples": 3}},
    )
    await set_jobs(api, pickup_s=0.05, duration_s=1.0, sequence=["success"])
    body = {"ScheduleId": "sch-adaptive", "FunctionKey": KEY, "Cron": "*/2 * * * * *"}
    status, out = await api.sim("POST", "/_sim/schedules", body)
    assert status == 201, out
    tracking = await api.track(kind="schedule", remote_id="sch-adaptive", timeout_s=120)
    tid = tracking["tracking_id"]

    def three_ended(events: list[dict[str, Any]]) -> bool:
        return sum(not o["skipped"] for o in occurrences(events)) >= 3

    await wait_for(api, tid, three_ended)
    learned = next(
        float(line.split()[-1])
        for line in (await api.metrics_text()).splitlines()
        if line.startswith(SAMPLES)
    )
    assert learned >= 3  # the occurrences' durations, as function jobs of the target

    async def planned_while_running() -> dict[str, Any]:
        async with asyncio.timeout(30):
            while True:
                status, t = await api.call("GET", f"/v1/trackings/{tid}")
                assert status == 200, t
                running = t["remote"]["ActiveOccurrences"]
                if running and t["next_poll_reason"] == "adaptive":
                    return t  # type: ignore[no-any-return]
                await asyncio.sleep(0.02)

    seen = await planned_while_running()
    assert seen["state"] == "active"
    assert seen["remote"]["ActiveOccurrences"][0]["job_status"] in ("Queued", "Leased")
