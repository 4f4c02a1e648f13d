"""Which rule sets a tracking's deadline (deadline_source), against the simulator."""

from __future__ import annotations

from orchestrator.clock import parse_iso
from tests.core.conftest import FAST_POLLING, StartService

LEASED = [{"after_s": 0, "status": "Queued"}, {"after_s": 0.05, "status": "Leased"}]


async def test_a_function_job_without_a_deadline_takes_the_jobs_own(
    start_service: StartService,
) -> None:
    api = await start_service(polling={**FAST_POLLING, "deadline_margin_s": 0.5})
    # TimeoutSeconds 1 x 2 attempts + 0 s between them + the 0.5 s margin: 2.5 s.
    status, made = await api.sim(
        "POST",
        "/_sim/script",
        {"kind": "function_job", "steps": LEASED, "timeout_seconds": 1, "max_attempts": 2,
         "retry_delay_s": 0},
    )  # fmt: skip
    assert status == 201, made
    t = await api.track(kind="function_job", remote_id=made["id"])
    assert t["deadline_source"] == "default"  # until a read shows the job
    done = await api.wait_terminal(t["tracking_id"])
    assert done["outcome"] == "deadline_exceeded"
    assert done["deadline_source"] == "derived"
    derived = parse_iso(done["deadline_at"]) - parse_iso(done["created_at"])
    assert abs(derived - 2.5) < 0.002  # both times are shown to the millisecond
    assert done["result"]["deadline_at"] == done["deadline_at"]


async def test_null_timeout_seconds_takes_the_workspaces_default(
    start_service: StartService, sim_url: str
) -> None:
    workspace = {"name": "default", "base_url": sim_url, "request_timeout_s": 2,
                 "job_timeout_default_s": 0.5}  # fmt: skip
    api = await start_service(
        polling={**FAST_POLLING, "deadline_margin_s": 0.25}, workspaces=[workspace]
    )
    status, made = await api.sim(
        "POST", "/_sim/script", {"kind": "function_job", "steps": LEASED, "max_attempts": 1}
    )
    assert status == 201, made
    t = await api.track(kind="function_job", remote_id=made["id"])
    done = await api.wait_terminal(t["tracking_id"])
    assert done["remote"]["TimeoutSeconds"] is None
    assert (done["outcome"], done["deadline_source"]) == ("deadline_exceeded", "derived")
    derived = parse_iso(done["deadline_at"]) - parse_iso(done["created_at"])
    assert abs(derived - 0.75) < 0.002


async def test_a_callers_deadline_and_other_kinds_are_not_derived(
    start_service: StartService,
) -> None:
    api = await start_service()
    job = await api.script("function_job", LEASED, max_attempts=1)
    given = await api.track(kind="function_job", remote_id=job, timeout_s=0.6)
    build = await api.script("net_operation_build", [{"after_s": 0, "status": "Running"}])
    other = await api.track(kind="net_operation_build", remote_id=build, timeout_s=None)
    done = await api.wait_terminal(given["tracking_id"])
    assert (done["outcome"], done["deadline_source"]) == ("deadline_exceeded", "caller")
    assert abs(parse_iso(done["deadline_at"]) - parse_iso(done["created_at"]) - 0.6) < 0.002
    status, read = await api.call("GET", f"/v1/trackings/{other['tracking_id']}")
    assert status == 200 and read["polls"] >= 1
    assert read["deadline_source"] == "default"
    assert read["deadline_at"] == other["deadline_at"]  # polling.default_deadline_s
