"""A function job tracked without a deadline gets the job's own, on virtual time."""

from __future__ import annotations

from orchestrator.clock import iso
from tests.engine.harness import body, rig, run

JOB = "/api/workspace/functions/jobs/J-1"


def test_the_first_read_derives_the_deadline_and_it_is_kept() -> None:
    async def main() -> None:
        r = await rig()
        leased = {
            "JobId": "J-1",
            "Status": "Leased",
            "TimeoutSeconds": 10,
            "EffectiveMaxAttempts": 3,
            "RetryDelaySeconds": 5,
        }
        r.transport.script(JOB, body(200, leased))
        t = await r.track("function_job", "J-1", deadline_s=3600, deadline_source="default")
        final = await r.final(t.tracking_id)
        # 10 s x 3 attempts + 5 s x 2 retry delays + the 60 s margin, from the intake.
        derived = t.created_at + 10 * 3 + 5 * 2 + 60
        assert final.outcome == "deadline_exceeded"
        assert (final.deadline_at, final.deadline_source) == (derived, "derived")
        assert final.result is not None and final.result["deadline_at"] == iso(derived)
        assert final.terminal_at is not None and derived <= final.terminal_at < derived + 1
        await r.close()

    run(main)


def test_a_caller_deadline_is_not_derived() -> None:
    async def main() -> None:
        r = await rig()
        r.transport.script(
            JOB, body(200, {"JobId": "J-1", "Status": "Leased", "EffectiveMaxAttempts": 1})
        )
        t = await r.track("function_job", "J-1", deadline_s=900)
        final = await r.final(t.tracking_id)
        assert (final.deadline_at, final.deadline_source) == (t.created_at + 900, "caller")
        await r.close()

    run(main)


def test_a_row_without_a_source_is_judged_by_its_deadline() -> None:
    """Rows a build that kept no source stored (an old replica mid-upgrade): the
    default deadline, exactly default_deadline_s after intake, is derived; any other
    was a caller's and is kept."""

    async def main() -> None:
        r = await rig()
        for i in (1, 2):
            leased = {"JobId": f"J-{i}", "Status": "Leased"}
            leased.update(TimeoutSeconds=10, EffectiveMaxAttempts=1)
            r.transport.script(f"/api/workspace/functions/jobs/J-{i}", body(200, leased))
        default = await r.track("function_job", "J-1", deadline_s=3600, deadline_source=None)
        caller = await r.track("function_job", "J-2", deadline_s=900, deadline_source=None)
        final = await r.final(default.tracking_id)
        # 10 s x 1 attempt + the 60 s margin, from the intake.
        derived = default.created_at + 10 + 60
        assert (final.deadline_at, final.deadline_source) == (derived, "derived")
        kept = await r.final(caller.tracking_id)
        assert (kept.deadline_at, kept.deadline_source) == (caller.created_at + 900, None)
        await r.close()

    run(main)
