"""Adaptive polling: the planner on a fake clock, and the engine on virtual time.

The planner's tests feed a ``Learner`` durations directly and ask it when it
would read; the engine's run tracked jobs against the fake transport, whose
bodies carry the FunctionKey and times a real job's do.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from orchestrator.clock import iso
from orchestrator.config import load_settings
from orchestrator.engine.adaptive import DurationSketch
from orchestrator.engine.decision import ReadAt, decide
from orchestrator.engine.entry import Entry
from orchestrator.engine.learner import DurationCollector, Learned, Learner
from orchestrator.engine.plan import best_grid, cost, plan_grid, schedule
from orchestrator.interpret import Phase, fallback_enums
from orchestrator.interpret.work import work_times
from orchestrator.kinds.base import Judgement
from orchestrator.metrics import Metrics
from orchestrator.store.base import NewTracking, Tracking
from orchestrator.store.memory import MemoryStore
from orchestrator.vocabulary import NextPollReason
from tests.engine.harness import EPOCH, Rig, body, rig, run

TARGET = 1.0
ENUMS = fallback_enums("function_job")


@dataclass
class FakeClock:
    wall: float = EPOCH
    mono: float = 0.0

    def now(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


def learner(clock: FakeClock, **adaptive: Any) -> Learner:
    settings = load_settings(
        None,
        polling={
            "initial_delay_s": 0.5,
            "max_delay_s": 8.0,
            "adaptive": {"detection_target_s": TARGET, "min_samples": 10, **adaptive},
        },
        metrics={"max_classes": 2},
    )
    return Learner(settings, Metrics(), clock)


def entry(clock: FakeClock, work_class: str | None = "fn.a", n: int = 1) -> Entry:
    t = Tracking(
        f"trk_{n}", "default", "function_job", f"J-{n}", "active", None, None, None, None,
        0, None, None, None, clock.now() + 3600, clock.now(), None, {}, None, None, "terminal",
    )  # fmt: skip
    return Entry(t, clock.monotonic() + 3600, work_class)


def pending() -> Judgement:
    return Judgement("ok", (), answered=True, unchanged=True)


def planned_age(lr: Learner, clock: FakeClock, e: Entry) -> float | None:
    """The age of the work at the read the planner would make next (None: backoff)."""
    due = lr.observe(e, pending(), clock.now(), clock.monotonic()).due
    return None if due is None else due - clock.monotonic() + (clock.now() - e.state.started)


def teach(lr: Learner, durations: list[float], work_class: str = "fn.a") -> None:
    for d in durations:
        lr.learn("default", "function_job", work_class, d)


# -- the planner ------------------------------------------------------------------------------


def test_a_steady_class_is_read_once_just_after_it_ends() -> None:
    rng = random.Random(1)
    clock = FakeClock()
    lr = learner(clock)
    teach(lr, [rng.uniform(4.9, 5.1) for _ in range(40)])
    e = entry(clock)
    age = planned_age(lr, clock, e)
    assert age is not None
    # After the class's longest duration, within about twice the target of it.
    assert 5.1 <= age <= 5.1 + 2 * TARGET
    clock.advance(age)
    assert planned_age(lr, clock, e) is None  # outlived its class: the backoff decides


def test_a_new_class_and_too_few_samples_fall_back_to_the_backoff() -> None:
    clock = FakeClock()
    lr = learner(clock)
    assert planned_age(lr, clock, entry(clock, work_class=None)) is None
    assert planned_age(lr, clock, entry(clock, work_class="fn.new")) is None
    teach(lr, [5.0] * 9)
    assert planned_age(lr, clock, entry(clock)) is None  # min_samples is 10
    teach(lr, [5.0])
    assert planned_age(lr, clock, entry(clock)) is not None


def test_disabled_learns_but_never_plans() -> None:
    clock = FakeClock()
    lr = learner(clock, enabled=False)
    teach(lr, [5.0] * 40)
    assert planned_age(lr, clock, entry(clock)) is None


def test_a_spread_class_keeps_the_mean_delay_within_the_target() -> None:
    rng = random.Random(2)
    sketch = DurationSketch()
    for _ in range(400):
        sketch.add(rng.uniform(1.0, 9.0), 200)
    grid = best_grid(sketch.segments(), TARGET, 1e9)
    delays = []
    for _ in range(2000):
        d = rng.uniform(1.0, 9.0)
        at = next((g for g in grid if g >= d), None)  # the read that sees it end
        if at is not None:
            delays.append(at - d)
    assert len(delays) > 1900  # the grid covers the class
    assert sum(delays) / len(delays) <= TARGET * 1.15
    assert not [g for g in grid if g < 0.9]  # no read where the class never ends


def test_no_more_reads_than_the_backoff_over_a_wide_class() -> None:
    rng = random.Random(3)
    sketch = DurationSketch()
    for _ in range(300):
        sketch.add(rng.uniform(60, 600), 200)
    p = load_settings(None, polling={"initial_delay_s": 1, "max_delay_s": 30}).polling
    grid = plan_grid(sketch, TARGET, p)
    until = 700.0
    planned, backoff = (
        cost(schedule(grid, p, 0.0, until), sketch),
        cost(schedule((), p, 0.0, until), sketch),
    )
    assert grid and planned.reads <= backoff.reads
    assert planned.p95_delay <= backoff.p95_delay
    assert grid[0] > 25  # nothing read before the class's shortest work but max_delay's
    assert max(b - a for a, b in zip((0.0, *grid), grid, strict=False)) <= 30 + 1e-9


def test_a_change_of_regime_goes_back_to_the_backoff_then_learns_the_new_one() -> None:
    rng = random.Random(4)
    clock = FakeClock()
    lr = learner(clock, half_life_samples=20)
    teach(lr, [rng.uniform(1.9, 2.1) for _ in range(60)])
    before = planned_age(lr, clock, entry(clock))
    assert before is not None and before < 2.1 + 2 * TARGET
    late = entry(clock, n=2)
    clock.advance(before + 0.5)
    assert planned_age(lr, clock, late) is None  # outlived the class: the backoff reads
    # The class now takes three times as long: one such duration is an outlier...
    teach(lr, [rng.uniform(5.9, 6.1)])
    clock.advance(2.0)  # the grid is drawn again at most once a second
    assert planned_age(lr, clock, entry(clock, n=3)) == pytest.approx(before, abs=0.01)
    # ...the second in a row, both more than a doubling beyond everything seen, is a
    # change: the class starts again from those two, so the first read is where the
    # new durations end, not at the old ones (which would otherwise outweigh them for
    # a half-life of samples).
    teach(lr, [rng.uniform(5.9, 6.1)])
    clock.advance(2.0)
    age = planned_age(lr, clock, entry(clock, n=4))
    assert age is not None and 5.9 <= age <= 6.1 + 2 * TARGET
    # Work that outlives the new durations is the backoff's again.
    late = entry(clock, n=5)
    clock.advance(6.1 + 2 * TARGET + 0.5)
    assert planned_age(lr, clock, late) is None


def test_durations_just_beyond_the_range_are_a_change_only_three_in_a_row() -> None:
    clock = FakeClock()
    lr = learner(clock, half_life_samples=20)
    teach(lr, [2.0 + 0.01 * (i % 11) for i in range(60)])
    before = planned_age(lr, clock, entry(clock))
    assert before is not None and before < 2.2 + 2 * TARGET
    for n, change in ((2, False), (3, False), (4, True)):
        teach(lr, [3.0])  # beyond the range, but less than a doubling beyond it
        clock.advance(2.0)
        age = planned_age(lr, clock, entry(clock, n=n))
        assert age is not None
        assert (age >= 3.0) is change, n


def test_work_that_outlives_its_class_joins_the_backoff_at_its_pace() -> None:
    clock = FakeClock()
    lr = learner(clock)
    teach(lr, [2.0] * 40)
    late = entry(clock)
    clock.advance(6.0)  # well past the class: the backoff (0.5 s, again, x2 to 8 s)
    learned = lr.observe(late, pending(), clock.now(), clock.monotonic())
    # By age 6 the backoff's reads are at 0.5, 1, 2, 4, 8: its delay there is 4 s.
    assert learned.due is None and learned.rejoin == pytest.approx(4.0)
    late.state = late.state._replace(polls=1)  # the planned read was its first
    p = load_settings(None, polling={"initial_delay_s": 0.5, "max_delay_s": 8.0}).polling
    d = decide(late, pending(), learned, clock.now(), clock.monotonic(), p, 0.5)
    assert d.next_read == (clock.monotonic() + 4.0, NextPollReason.BACKOFF)
    assert d.state.delay == 4.0  # and goes on from there: 8 s next


def test_an_erratic_class_falls_back_to_the_backoff() -> None:
    rng = random.Random(5)
    clock = FakeClock()
    lr = learner(clock)
    teach(lr, [rng.uniform(2.0, 2.2) for _ in range(40)])
    assert planned_age(lr, clock, entry(clock)) is not None
    # Each new duration lands far outside everything seen before it.
    teach(lr, [10.0 * 3**i for i in range(4)])
    clock.advance(2.0)
    assert planned_age(lr, clock, entry(clock, n=2)) is None


def test_an_outlier_does_not_move_the_plan() -> None:
    clock = FakeClock()
    lr = learner(clock)
    teach(lr, [3.0] * 50)
    first = planned_age(lr, clock, entry(clock))
    teach(lr, [300.0])
    clock.advance(2.0)  # the grid is drawn again at most once a second
    assert planned_age(lr, clock, entry(clock, n=2)) == pytest.approx(first, abs=0.01)


def test_a_plan_never_passes_the_deadline_max_delay_or_a_retry_after() -> None:
    clock = FakeClock()
    e = entry(clock)
    p = load_settings(None, polling={"max_delay_s": 8.0}).polling

    def read(j: Judgement, planned: float) -> ReadAt:
        plan = Learned(e.state.work_class, e.state.started, planned)
        d = decide(e, j, plan, clock.now(), clock.monotonic(), p, 0.5)
        assert d.next_read is not None
        return d.next_read

    far = clock.monotonic() + 100
    assert read(pending(), far) == (clock.monotonic() + 8.0, NextPollReason.ADAPTIVE)
    soon = clock.monotonic() + 2.0
    limited = Judgement("rate_limited", (), answered=True, retry_after=5.0)
    r = read(limited, soon)
    assert r.due >= clock.monotonic() + 5.0 and r.reason is NextPollReason.RETRY_AFTER
    e.state = e.state._replace(deadline_mono=clock.monotonic() + 1.0)
    assert read(pending(), soon) == (e.state.deadline_mono, NextPollReason.DEADLINE)
    waiting = Judgement("ok", (), answered=True, phase=Phase.PENDING, next_run_at=clock.now() + 4.0)
    # NextRunAt (4 s) is past the deadline (1 s)
    assert read(waiting, soon).reason is NextPollReason.DEADLINE
    e.state = e.state._replace(deadline_mono=clock.monotonic() + 100)
    r = read(waiting, soon)
    assert r.due == pytest.approx(clock.monotonic() + 4.0)
    assert r.reason is NextPollReason.NEXT_RUN_AT


def test_the_job_s_own_class_wins_over_the_hint(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    lr = learner(clock)
    e = entry(clock, work_class="fn.given")
    shown = {"JobId": "J-1", "Status": "Leased", "FunctionKey": "fn.own"}
    work = work_times("function_job", shown, {})  # what the interpreter hands on
    j = Judgement("ok", (), answered=True, phase=Phase.PENDING, remote=shown, work=work)
    with caplog.at_level(logging.WARNING, logger="orchestrator.engine"):
        learned = lr.observe(e, j, clock.now(), clock.monotonic())
    assert learned.work_class == "fn.own"
    assert "differs from the intake" in caplog.text


async def test_summaries_survive_a_restart_through_the_store() -> None:
    clock = FakeClock()
    store = MemoryStore()
    lr = learner(clock)
    teach(lr, [5.0] * 30)
    teach(lr, [2.0] * 30, work_class="fn.b")
    await lr.flush(store)
    again = learner(clock)
    assert await again.load(store) == 2
    restored = planned_age(again, clock, entry(clock))
    assert restored == pytest.approx(planned_age(lr, clock, entry(clock)), abs=1e-6)
    stored = {w.work_class: w.summary["n"] for w in await store.load_work_classes()}
    assert stored == {"fn.a": 30, "fn.b": 30}


async def test_classes_are_bounded_in_memory_store_and_labels() -> None:
    clock = FakeClock()
    store = MemoryStore()
    lr = learner(clock, max_classes=3)
    for name in ("a", "b", "c", "d"):
        teach(lr, [1.0, 2.0], work_class=f"fn.{name}")
    await lr.flush(store)
    assert sorted(w.work_class for w in await store.load_work_classes()) == [
        "fn.b", "fn.c", "fn.d"
    ]  # fmt: skip
    assert {k[2] for k in lr.shown} == {"fn.a", "fn.b", "other"}  # metrics.max_classes is 2
    registry = CollectorRegistry()
    registry.register(DurationCollector(lr.shown))
    text = generate_latest(registry).decode()
    assert 'orchestrator_work_duration_seconds{class="other",kind="function_job",' in text
    assert 'orchestrator_work_duration_samples{class="other"' in text


# -- the engine -------------------------------------------------------------------------------


def job_body(n: int, created: float, ends: float, now: float) -> dict[str, Any]:
    out: dict[str, Any] = {
        "JobId": f"J-{n}", "FunctionKey": "fn.steady", "CreatedAt": iso(EPOCH + created),
        "Status": "Leased", "CanCancel": False,
    }  # fmt: skip
    if now >= ends:
        out["Status"] = "Completed"
        out["Run"] = {
            "RunId": f"R-{n}", "Attempt": 1, "Status": "Success",
            "CompletedAt": iso(EPOCH + ends), "DurationMs": 1000, "ResultSummary": "done",
        }  # fmt: skip
    return out


async def track_jobs(r: Rig, count: int, hint: str | None, run_s: float = 5.0) -> list[int]:
    """``count`` jobs one after another, each ending ``run_s`` after it was created;
    returns the number of status reads each took."""
    reads = []
    for n in range(count):
        created = r.clock.monotonic()
        path = f"/api/workspace/functions/jobs/J-{n}"

        def reply(t: float, n: int = n, created: float = created) -> Any:
            return body(200, job_body(n, created, created + run_s, t))

        r.transport.script(path, reply)
        now = r.clock.now()
        item = NewTracking(
            f"trk_{n:024x}", "default", "function_job", f"J-{n}", now + 600, now, now + 1
        )
        [(tracking, _)] = await r.store.create_trackings([item])
        r.engine.add(tracking, hint)
        final = await r.final(tracking.tracking_id, within_s=120)
        assert final.outcome == "succeeded"
        reads.append(r.transport.count(path, "GET"))
    return reads


def test_the_engine_learns_a_class_and_reads_it_once() -> None:
    async def main() -> None:
        r = await rig(initial_delay_s=0.5, max_delay_s=8.0, adaptive={"min_samples": 10})
        reads = await track_jobs(r, 30, "fn.steady")
        learning, learned = reads[:10], reads[12:]
        assert min(learning) >= 3  # the backoff: 0.5, 1.5, 3.5, 7.5 s
        assert set(learned) == {1}
        # The first read of a hinted job of a known class is the planner's.
        now = r.clock.now()
        item = NewTracking("trk_x", "default", "function_job", "J-x", now + 600, now, now + 1)
        r.transport.script("/api/workspace/functions/jobs/J-x", body(200, job_body(99, 0, 1e9, 0)))
        [(tracking, _)] = await r.store.create_trackings([item])
        r.engine.add(tracking, "fn.steady")
        live = r.engine.live(tracking)
        assert live.next_poll_reason == NextPollReason.ADAPTIVE
        await r.close()

    run(main)


def test_without_a_hint_the_class_is_known_from_the_first_read() -> None:
    async def main() -> None:
        r = await rig(initial_delay_s=0.5, max_delay_s=8.0, adaptive={"min_samples": 10})
        reads = await track_jobs(r, 25, None)
        assert set(reads[14:]) == {2}  # the first read, then the planner's
        await r.close()

    run(main)


def test_disabled_the_engine_keeps_the_backoff() -> None:
    async def main() -> None:
        r = await rig(initial_delay_s=0.5, max_delay_s=8.0, adaptive={"enabled": False})
        reads = await track_jobs(r, 25, "fn.steady")
        assert min(reads) >= 3
        await r.close()

    run(main)


def test_a_resumed_tracking_keeps_its_class_and_its_work_s_start() -> None:
    async def main() -> None:
        polling: dict[str, Any] = {
            "initial_delay_s": 0.5, "max_delay_s": 60.0, "adaptive": {"min_samples": 10},
        }  # fmt: skip
        r = await rig(**polling)
        await track_jobs(r, 12, "fn.steady", run_s=30.0)
        # A job created 4 s before it was handed to us, ending 30 s after its creation.
        intake = r.clock.monotonic()
        created, ends = intake - 4.0, intake + 26.0
        path = "/api/workspace/functions/jobs/J-long"

        def reply(t: float) -> Any:
            return body(200, {**job_body(7, created, ends, t), "JobId": "J-long"})

        r.transport.script(path, reply)
        now = r.clock.now()
        item = NewTracking("trk_long", "default", "function_job", "J-long", now + 600, now, now)
        [(tracking, _)] = await r.store.create_trackings([item])
        r.engine.add(tracking)  # no hint: the first read shows the class
        while r.transport.count(path) < 1:
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)
        await r.close()  # a graceful stop: the learned durations are flushed
        stored = await r.store.get_tracking("trk_long")
        assert stored is not None and stored.state == "active"
        assert (stored.work_class, stored.work_started_at) == ("fn.steady", EPOCH + created)

        again = await rig(backend=r.store, **polling)
        again.transport.script(path, reply)
        assert await again.engine.resume(again.store) == 1
        entry = again.engine.entries["trk_long"]
        assert (entry.state.work_class, entry.state.started) == ("fn.steady", EPOCH + created)
        while again.transport.count(path) < 1:  # the resumed first read (the same body)
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.1)
        live = again.engine.live(await again.store.get_tracking("trk_long"))  # type: ignore[arg-type]
        assert live.next_poll_reason == NextPollReason.ADAPTIVE
        # Planned from the work's own start, where the class ends (30 s after it, to a
        # bin's width), not 30 s after the intake (34 s after the start) nor by the backoff.
        assert live.next_poll_at is not None
        assert EPOCH + created + 27.0 <= live.next_poll_at <= EPOCH + created + 32.0
        final = await again.final("trk_long", within_s=120)
        assert final.outcome == "succeeded"
        # The backoff would read five times or more over those 17 s.
        assert again.transport.count(path) <= 3
        await again.close()

    run(main)
