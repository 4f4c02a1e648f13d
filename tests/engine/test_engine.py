"""The engine's rules on virtual time against a fake transport: every read is the engine's."""

from __future__ import annotations

import asyncio
import itertools
from email.utils import formatdate
from typing import Any

from orchestrator.clock import iso
from tests.engine.harness import EPOCH, Answer, body, rig, run

JOB = "/api/workspace/functions/jobs/J-1"
CANCEL = JOB + "/cancel"


def job(status: str, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"JobId": "J-1", "Status": status, "CanCancel": status == "Queued"}
    out.update(fields)
    return out


def completed(**run: Any) -> dict[str, Any]:
    evidence = {
        "RunId": "R-1",
        "JobId": "J-1",
        "Attempt": 1,
        "Status": "Success",
        "StartedAt": "2027-01-15T08:00:00.000Z",
        "CompletedAt": "2027-01-15T08:00:01.000Z",
        "DurationMs": 1000,
        "ResultSummary": "done",
        "ResultData": {"n": 1},
    }
    evidence.update(run)
    return job("Completed", CurrentAttempt=1, Run=evidence)


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


def read_times(r: Any, path: str = JOB) -> list[float]:
    return [t for t, method, p in r.transport.log if p == path and method == "GET"]


def test_backoff_doubles_to_its_cap_with_jitter_within_bounds() -> None:
    async def main() -> None:
        r = await rig()
        r.transport.script(JOB, body(200, job("Leased")))
        await r.track("function_job", "J-1")
        await asyncio.sleep(600)
        times = read_times(r)
        delay = 1.0  # the first read is a change (nothing was known): the backoff starts
        for gap in gaps(times):
            # jitter +-20%, plus the read's own latency and the 5 ms granule
            assert 0.8 * delay <= gap <= 1.2 * delay + 0.02, (gap, delay)
            delay = min(delay * 2, 30.0)
        assert 24 <= gaps(times)[-1] <= 36.02  # held at max_delay_s
        assert len({round(g, 3) for g in gaps(times)[-6:]}) > 1  # jittered, not fixed
        await r.close()

    run(main)


def test_a_change_restarts_the_backoff_and_is_stored() -> None:
    async def main() -> None:
        r = await rig(jitter=0.0)
        r.transport.script(JOB, *[body(200, job("Queued"))] * 5, body(200, job("Leased")))
        t = await r.track("function_job", "J-1")
        await asyncio.sleep(200)
        g = gaps(read_times(r))
        # Queued read 5 times (gaps 1, 2, 4, 8, 16), then Leased: the next gap is 1 again.
        assert [round(x) for x in g[:7]] == [1, 2, 4, 8, 16, 1, 2]
        stored = await r.store.get_tracking(t.tracking_id)
        assert stored is not None and stored.remote_status == "Leased"
        await r.close()

    run(main)


def test_deadline_ends_with_the_latest_state_and_no_read_after_it() -> None:
    async def main() -> None:
        r = await rig()
        r.transport.script(JOB, body(200, job("Queued")), body(200, job("Leased", Note="x")))
        t = await r.track("function_job", "J-1", deadline_s=50)
        final = await r.final(t.tracking_id)
        assert final.outcome == "deadline_exceeded"
        assert final.result is not None
        assert final.result["last_remote_status"] == "Leased"
        assert final.result["deadline_at"] == iso(t.deadline_at)
        assert final.remote == job("Leased", Note="x")
        assert final.terminal_at is not None
        assert t.deadline_at <= final.terminal_at <= t.deadline_at + 0.05
        assert max(read_times(r)) <= t.deadline_at - EPOCH
        [event] = [e for e in await r.events() if e["subject"] == t.tracking_id]
        assert event["type"].endswith(".deadline_exceeded")
        await r.close()

    run(main)


def test_a_queued_job_is_not_read_before_its_next_run_at() -> None:
    async def main() -> None:
        r = await rig()
        next_run = EPOCH + 120.0
        r.transport.script(JOB, body(200, job("Queued", NextRunAt=iso(next_run), CanCancel=True)))
        t = await r.track("function_job", "J-1")
        await asyncio.sleep(5)
        live = r.engine.live(await r.store.get_tracking(t.tracking_id))  # type: ignore[arg-type]
        assert live.next_poll_reason == "next_run_at"
        await asyncio.sleep(200)
        times = read_times(r)
        assert times[0] < 2 and all(x >= 120.0 for x in times[1:]) and len(times) > 1
        await r.close()

    run(main)


def _blocks_every_request(retry_after: str, wait_s: float) -> None:
    async def main() -> None:
        r = await rig(jitter=0.0)
        r.transport.script(JOB, body(429, {}, retry_after), body(200, job("Leased")))
        r.transport.script("/api/workspace/functions/jobs/J-2", body(200, job("Leased")))
        await r.track("function_job", "J-1")
        await asyncio.sleep(0.5)
        await r.track("function_job", "J-2")  # due at 1.5 s, inside the window
        await asyncio.sleep(wait_s + 10)
        first = r.transport.log[0][0]
        blocked = [t for t, _, _ in r.transport.log[1:] if t < first + wait_s - 0.02]
        assert blocked == [], r.transport.log[:5]
        assert len(r.transport.log) > 2  # both were read once the window passed
        await r.close()

    run(main)


def test_retry_after_seconds_holds_every_request_of_the_workspace() -> None:
    _blocks_every_request("20", 20.0)


def test_retry_after_http_date_holds_every_request_of_the_workspace() -> None:
    # An HTTP date is whole seconds: 30 s after the epoch second the virtual clock starts on.
    _blocks_every_request(formatdate(EPOCH + 31.0, usegmt=True), 29.0)


def test_not_found_needs_its_confirmations_over_its_window() -> None:
    async def main() -> None:
        r = await rig()
        r.transport.script(JOB, Answer(404, b"{}"))
        t = await r.track("function_job", "J-1")
        final = await r.final(t.tracking_id)
        assert final.outcome == "not_found"
        reads = read_times(r)
        assert final.result is not None and final.result["confirmations"] == len(reads) >= 3
        assert reads[-1] - reads[0] >= 10.0
        await r.close()

    run(main)


def test_an_answer_between_404s_starts_the_confirmations_again() -> None:
    async def main() -> None:
        r = await rig(not_found_min_s=0)
        gone = Answer(404, b"{}")
        r.transport.script(JOB, gone, gone, body(200, job("Leased")), gone, gone, gone)
        t = await r.track("function_job", "J-1")
        final = await r.final(t.tracking_id)
        assert final.outcome == "not_found" and final.result is not None
        assert final.result["confirmations"] == 3 and len(read_times(r)) == 6
        await asyncio.sleep(0)
        await r.close()

    run(main)


def test_completed_without_evidence_fails_closed_until_the_evidence_is_there() -> None:
    async def main() -> None:
        r = await rig()
        unconfirmed = completed(ResultSummary="")
        r.transport.script(JOB, *[body(200, unconfirmed)] * 3, body(200, completed()))
        t = await r.track("function_job", "J-1")
        final = await r.final(t.tracking_id)
        assert final.outcome == "succeeded" and len(read_times(r)) == 4
        anomalies = r.engine.metrics.contract_anomalies_total.labels(
            workspace="default", kind="function_job", reason="completed_without_evidence"
        )
        assert anomalies._value.get() == 3
        await r.close()

    run(main)


def test_cancel_is_sent_only_while_can_cancel_is_true() -> None:
    async def main() -> None:
        r = await rig()
        r.transport.script(JOB, body(200, job("Leased")))
        r.transport.script(CANCEL, body(200, job("Cancelled")))
        t = await r.track("function_job", "J-1")
        await asyncio.sleep(2)
        refused = await r.engine.cancel(t.tracking_id)
        assert refused is not None and refused.status == 409
        assert r.transport.count(CANCEL) == 0
        r.transport.script(JOB, body(200, job("Queued")))
        accepted = await r.engine.cancel(t.tracking_id)
        assert accepted is not None and accepted.status == 202
        assert r.transport.count(CANCEL, "POST") == 1
        await r.close()

    run(main)


def test_one_terminal_event_when_an_abandon_meets_a_terminal_read() -> None:
    async def main() -> None:
        r = await rig()
        r.transport.latency_s = 2.0  # the terminal answer is on its way during the abandon
        r.transport.script(JOB, body(200, completed()))
        t = await r.track("function_job", "J-1")
        await asyncio.sleep(2.0)
        ended = await r.engine.abandon(t.tracking_id)
        assert ended is not None and ended.outcome == "abandoned"
        assert await r.engine.abandon(t.tracking_id) is None
        await asyncio.sleep(30)
        events = [e for e in await r.events() if e["subject"] == t.tracking_id]
        assert [e["type"].rsplit(".", 1)[1] for e in events] == ["abandoned"]
        final = await r.store.get_tracking(t.tracking_id)
        assert final is not None and final.outcome == "abandoned"
        await r.close()

    run(main)
