"""Work found by filter on virtual time: a deadline met while Retry-After holds
every request still says what the tracking was waiting for."""

from __future__ import annotations

import asyncio
from typing import Any

from orchestrator.api.intake import filter_intake
from orchestrator.api.models import IntakeBody
from orchestrator.store.base import NewTracking
from tests.engine.harness import body, rig, run

JOBS = "/api/workspace/admin/function-operations/jobs"


def test_a_deadline_inside_a_retry_after_window_keeps_what_was_seen() -> None:
    async def main() -> None:
        r = await rig(jitter=0.0)
        # The first list answers no match; the next a 429 whose window outlasts the deadline.
        r.transport.script(JOBS, body(200, {"Items": [], "Total": 0}), body(429, {}, "600"))
        now = r.clock.now()
        intake = IntakeBody.model_validate(
            {"kind": "trigger_work", "trigger_binding_id": "bind-1", "entity_id": "ord-1"}
        )
        key, remote = filter_intake(intake, now, 5.0, None)
        item = NewTracking(
            tracking_id="trk_" + "1" * 24, workspace="default", kind="trigger_work",
            remote_id=key, deadline_at=now + 20, created_at=now, next_poll_at=now + 1,
            remote=remote,
        )  # fmt: skip
        [(tracking, _)] = await r.store.create_trackings([item])
        r.engine.add(tracking)
        final = await r.final(tracking.tracking_id, within_s=120)
        assert r.transport.count(JOBS) == 2  # no read inside the window
        assert final.outcome == "deadline_exceeded"
        result: dict[str, Any] = final.result or {}
        assert result["seen"] == {"matched": 0, "expected": 1}, result
        assert "no matching job seen since" in result["detail"], result
        await asyncio.sleep(0)
        await r.close()

    run(main)
