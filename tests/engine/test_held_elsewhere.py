"""An abandon through a replica that does not hold the tracking ends it as the
holder would: the same result shape, event and metrics, one terminal path."""

from __future__ import annotations

import copy

from orchestrator.engine.cancel import HeldElsewhere
from orchestrator.store.base import NewTracking
from orchestrator.workfilter import WorkFilter
from tests.engine.harness import body, rig, run


def test_an_unheld_trigger_work_abandon_names_no_filter_key_and_is_counted() -> None:
    async def main() -> None:
        r = await rig()
        key = WorkFilter(trigger_binding_id="TB-1", entity_id="E-1").key()
        now = r.clock.now()
        item = NewTracking("trk_unheld", "default", "trigger_work", key, now + 600, now - 30, now)
        [(tracking, _)] = await r.store.create_trackings([item])
        assert "trk_unheld" not in r.engine.entries  # this replica does not hold it
        given = copy.deepcopy(tracking)
        elsewhere = HeldElsewhere(r.engine.clients, r.engine.finisher, r.engine.poll_metrics)

        ended = await elsewhere.abandon(tracking)

        assert ended is not None and ended.outcome == "abandoned"
        assert tracking == given  # the caller's copy is left as it was
        stored = await r.store.get_tracking("trk_unheld")
        assert stored is not None and stored.state == "terminal"
        assert stored.result == {"remote_id": None, "last_remote_status": None}
        [event] = await r.events()
        assert event["type"].endswith(".abandoned")
        assert event["data"]["result"] == stored.result
        assert "filter:" not in str(stored.result) + str(event["data"]["result"])
        # Counted as the holder counts an ending: outcome and time to terminal.
        sample = r.engine.metrics.registry.get_sample_value
        labels = {"kind": "trigger_work", "outcome": "abandoned"}
        ended_total = "orchestrator_trackings_terminal_total"
        assert sample(ended_total, {**labels, "workspace": "default"}) == 1
        assert sample("orchestrator_time_to_terminal_seconds_count", labels) == 1
        assert (sample("orchestrator_time_to_terminal_seconds_sum", labels) or 0) >= 30
        assert await elsewhere.abandon(tracking) is None  # ended already: nothing written
        assert len(await r.events()) == 1
        await r.close()

    run(main)


def test_a_cancel_of_an_unheld_job_is_counted_as_the_holder_counts_it() -> None:
    async def main() -> None:
        r = await rig()
        now = r.clock.now()
        item = NewTracking("trk_far", "default", "function_job", "J-far", now + 600, now, now)
        [(tracking, _)] = await r.store.create_trackings([item])
        job = {"JobId": "J-far", "Status": "Leased", "CanCancel": False}
        r.transport.script("/api/workspace/functions/jobs/J-far", body(200, job))
        elsewhere = HeldElsewhere(r.engine.clients, r.engine.finisher, r.engine.poll_metrics)

        answer = await elsewhere.cancel(tracking)

        assert answer is not None and answer.status == 409  # CanCancel false: not sent
        sample = r.engine.metrics.registry.get_sample_value
        labels = {"workspace": "default", "kind": "function_job"}
        assert sample("orchestrator_polls_total", {**labels, "result": "ok"}) == 1
        assert sample("orchestrator_poll_duration_seconds_count", labels) == 1
        await r.close()

    run(main)
