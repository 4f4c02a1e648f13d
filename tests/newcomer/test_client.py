"""``orchestrator.client`` against a real service: results are typed, problems are typed errors."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from orchestrator.client import (
    Conflict,
    Event,
    InvalidRequest,
    NotFound,
    OrchestratorApiError,
    OrchestratorClient,
    Tracking,
    Unauthorized,
    intake_body,
)
from tests.newcomer.conftest import Stack

LEASED_FOREVER = [{"after_s": 0, "status": "Queued"}, {"after_s": 0.1, "status": "Leased"},
                  {"after_s": 3600, "status": "Completed"}]  # fmt: skip
QUICK = [{"after_s": 0, "status": "Queued"}, {"after_s": 0.2, "status": "Completed"}]


async def test_each_problem_is_a_typed_error(stack: Stack) -> None:
    async with OrchestratorClient(stack.url, token="not-the-token") as wrong:
        with pytest.raises(Unauthorized) as unauthorized:
            await wrong.get("trk_" + "0" * 24)
    assert unauthorized.value.status == 401 and unauthorized.value.title == "Unauthorized"

    async with OrchestratorClient(stack.url, token=stack.token) as orch:
        with pytest.raises(NotFound) as not_found:
            await orch.get("trk_" + "0" * 24)
        assert not_found.value.status == 404 and not_found.value.field == "tracking_id"

        with pytest.raises(InvalidRequest) as invalid:
            await orch.track("function_job", "..")
        assert invalid.value.status == 422 and invalid.value.field == "remote_id"
        with pytest.raises(InvalidRequest) as both:
            await orch.track("function_job", "J-1", timeout_s=5, deadline_at="2999-01-01T00:00:00Z")
        assert both.value.field == "timeout_s"

        build_steps = [{"after_s": 0, "status": "Queued"}, {"after_s": 0.5, "status": "Succeeded"}]
        build = await orch.track(
            "net_operation_build", await stack.script("net_operation_build", build_steps)
        )
        with pytest.raises(Conflict) as not_cancellable:
            await orch.cancel(build.tracking_id)
        assert not_cancellable.value.status == 409 and not_cancellable.value.field == "kind"

        ended = await orch.wait(build.tracking_id, poll_s=0.1, timeout_s=20)
        with pytest.raises(Conflict) as already:
            await orch.abandon(ended.tracking_id)
        assert already.value.body["outcome"] == ended.outcome
        assert isinstance(already.value, OrchestratorApiError)


async def test_track_wait_and_read_the_event(stack: Stack) -> None:
    async with OrchestratorClient(stack.url, token=stack.token) as orch:
        first = await orch.events(after=0, limit=1000)
        rid = await stack.script("function_job", QUICK)
        tracking = await orch.track(
            "function_job", rid, labels={"team": "billing"}, correlation_id="req-42"
        )
        assert isinstance(tracking, Tracking) and tracking.state == "active"
        again = await orch.track("function_job", rid)
        assert again.tracking_id == tracking.tracking_id

        seen: list[tuple[str, str | None]] = []
        final = await orch.wait(
            tracking.tracking_id,
            poll_s=0.05,
            timeout_s=20,
            on_change=lambda t: seen.append((t.state, t.remote_status)),
        )
        assert final.outcome == "succeeded" and final.terminal
        assert final.result is not None and final.result["result_summary"]
        assert seen[-1] == ("terminal", "Completed")
        assert final.labels == {"team": "billing"} and final.correlation_id == "req-42"

        after = first.next_after
        async with asyncio.timeout(10):
            while True:
                page = await orch.events(after=after)
                mine = [e for e in page.events if e.subject == tracking.tracking_id]
                if mine:
                    break
                after = page.next_after
                await asyncio.sleep(0.05)
        [event] = mine
        assert isinstance(event, Event) and event.outcome == "succeeded"
        assert event.type == "com.moltaro.orchestrator.tracking.succeeded"
        assert event.data.tracking_id == tracking.tracking_id

        async def first_streamed() -> Event:
            async for streamed in orch.stream_events(after=event.seq - 1):
                return streamed
            raise AssertionError("the stream ended")

        streamed = await asyncio.wait_for(first_streamed(), 10)
        assert streamed.id == event.id and streamed.seq == event.seq


async def test_batch_list_cancel_abandon_follow_ups(stack: Stack) -> None:
    async with OrchestratorClient(stack.url, token=stack.token) as orch:
        queued = await stack.script(
            "function_job",
            [{"after_s": 0, "status": "Queued"}, {"after_s": 3600, "status": "Leased"}],
        )
        leased = await stack.script("function_job", LEASED_FOREVER)
        items = await orch.track_batch(
            [
                intake_body("function_job", queued, labels={"batch": "b1"}),
                intake_body("function_job", leased, labels={"batch": "b1"}),
                {"kind": "function_job", "remote_id": "bad id"},
            ]
        )
        assert [i.status for i in items] == [201, 201, 422]
        assert items[2].tracking is None and items[2].problem is not None
        assert items[2].problem["field"] == "items.2.remote_id"
        to_cancel, to_abandon = (i.tracking for i in items[:2])
        assert to_cancel is not None and to_abandon is not None

        listed = [t.tracking_id async for t in orch.list(labels={"batch": "b1"}, page_size=1)]
        assert sorted(listed) == sorted([to_cancel.tracking_id, to_abandon.tracking_id])

        async with asyncio.timeout(20):
            while (await orch.get(to_cancel.tracking_id)).remote_status != "Queued":
                await asyncio.sleep(0.05)
        answer = await orch.cancel(to_cancel.tracking_id)
        assert answer.tracking_id == to_cancel.tracking_id
        cancelled = await orch.wait(to_cancel.tracking_id, poll_s=0.05, timeout_s=20)
        assert cancelled.outcome == "cancelled"

        async with asyncio.timeout(20):
            while (await orch.get(to_abandon.tracking_id)).remote_status != "Leased":
                await asyncio.sleep(0.05)
        with pytest.raises(Conflict):
            await orch.cancel(to_abandon.tracking_id)  # CanCancel is false while Leased
        abandoned = await orch.abandon(to_abandon.tracking_id)
        assert abandoned.outcome == "abandoned"

        assert await orch.track_follow_ups({"FollowUpOperationIds": []}) == []
        follow = await stack.script("function_job", QUICK)
        [tracked] = await orch.track_follow_ups(
            {"Succeeded": True, "FollowUpOperationIds": [follow]}
        )
        assert tracked.remote_id == follow and tracked.kind == "function_job"
        assert "orchestrator_polls_total" in await orch.metrics()


async def test_the_client_tracks_work_found_by_filter(stack: Stack) -> None:
    async with OrchestratorClient(stack.url, token=stack.token) as orch:
        tracking = await orch.track(
            "trigger_work",
            trigger_binding_id="bind-order-shipped",
            filter_correlation_id="corr-client",
            since=datetime(2026, 1, 1, tzinfo=UTC),
        )
        assert tracking.kind == "trigger_work" and tracking.remote_id is None
        assert tracking.filter is not None
        assert tracking.filter["filter_correlation_id"] == "corr-client"
        assert tracking.filter["since"] == "2026-01-01T00:00:00.000Z"
        again = await orch.track(
            "trigger_work",
            trigger_binding_id="bind-order-shipped",
            filter_correlation_id="corr-client",
            since="2026-01-01T00:00:00Z",
        )
        assert again.tracking_id == tracking.tracking_id
        with pytest.raises(InvalidRequest) as refused:
            await orch.track("action_work", job_id="J-1", expect_jobs=2)
        assert refused.value.field == "expect_jobs"
        await orch.abandon(tracking.tracking_id)
