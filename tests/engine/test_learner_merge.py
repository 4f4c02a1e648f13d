"""Adaptive polling's learning merged through the store: one process or several.

Each learner keeps what it learned since its last flush and merges it into the
stored summary; the tests run two learners on one store (memory and SQLite
here, PostgreSQL in the store contract suite) on a fake clock.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from orchestrator.engine.adaptive import DurationSketch, bin_of, merged
from orchestrator.errors import StoreError
from orchestrator.store import MemoryStore, SqliteStore, Store, WorkClassMerge, WorkClassSummary
from tests.engine.test_adaptive import FakeClock, learner, teach

HALF_LIFE = 50.0  # the default polling.adaptive.half_life_samples
KEY = ("default", "function_job", "fn.a")


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    backend: Store
    if request.param == "memory":
        backend = MemoryStore()
    else:
        backend = SqliteStore(tmp_path / "store.db", commit_interval_s=0.001)
    await backend.open()
    yield backend
    await backend.close()


def sketch_of(durations: Sequence[float]) -> DurationSketch:
    s = DurationSketch()
    for d in durations:
        s.add(d, HALF_LIFE)
    return s


async def stored(store: Store) -> DurationSketch:
    [row] = [
        w for w in await store.load_work_classes() if (w.workspace, w.kind, w.work_class) == KEY
    ]
    return DurationSketch.from_json(row.summary)


def test_a_merged_delta_weighs_as_if_added_after_the_base() -> None:
    rng = random.Random(3)
    first = [rng.uniform(1.0, 2.0) for _ in range(60)]
    then = [rng.uniform(8.0, 9.0) for _ in range(25)]
    base = sketch_of(first)
    delta, local = DurationSketch(), base.copy()  # as a learner keeps them
    for d in then:
        delta.add(d, HALF_LIFE, judged_by=local)
        local.add(d, HALF_LIFE)
    one_by_one = sketch_of(first + then)
    got = merged(base, delta, HALF_LIFE)
    assert got.count == one_by_one.count == 85
    assert got.bins.keys() == one_by_one.bins.keys()
    for i, w in one_by_one.bins.items():
        assert got.bins[i] == pytest.approx(w, rel=1e-9)
    assert got.surprise == pytest.approx(one_by_one.surprise, rel=1e-9)


async def test_two_learners_on_one_store_each_end_with_samples_from_both(store: Store) -> None:
    clock = FakeClock()
    a, b = learner(clock), learner(clock)
    for _ in range(3):  # each learns its own kind of work, and flushes every 30 s
        teach(a, [5.0] * 10)
        await a.flush(store)
        clock.advance(15)
        teach(b, [20.0] * 10)
        await b.flush(store)
        clock.advance(15)
    teach(a, [5.0])
    await a.flush(store)
    assert (await stored(store)).count == 61  # nothing lost to a last writer
    assert b.shown[KEY].count == 60  # not flushed since a's last sample
    await b.flush(store)  # nothing of its own to merge: it still picks up its peer's
    for lr in (a, b):
        sketch = lr.shown[KEY]  # what /metrics shows, and the planner uses
        assert sketch.count == 61
        assert {bin_of(5.0), bin_of(20.0)} <= sketch.bins.keys()
        assert sketch.quantile(0.1) < 6.0 < 19.0 < sketch.quantile(0.9)


async def test_the_store_holds_what_one_learner_seeing_every_sample_would(store: Store) -> None:
    clock = FakeClock()
    a, b = learner(clock), learner(clock)
    teach(a, [1.0] * 30)
    await a.flush(store)
    teach(b, [3.0] * 20)
    await b.flush(store)
    one = sketch_of([1.0] * 30 + [3.0] * 20)
    got = await stored(store)
    assert got.count == one.count
    for i, w in one.bins.items():
        assert got.bins[i] == pytest.approx(w, abs=1e-6)
    assert b.shown[KEY].bins == got.bins  # b adopted the merged summary


class FailingOnce(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.fail = True

    async def merge_work_classes(
        self, merges: Sequence[WorkClassMerge], forget: Sequence[tuple[str, str, str]] = ()
    ) -> list[WorkClassSummary]:
        if self.fail:
            self.fail = False
            raise StoreError("the database is away")
        return await super().merge_work_classes(merges, forget)


async def test_a_delta_not_stored_is_merged_at_the_next_flush() -> None:
    clock = FakeClock()
    store = FailingOnce()
    await store.open()
    lr = learner(clock)
    teach(lr, [2.0] * 5)
    await lr.flush(store)  # refused: kept
    assert await store.load_work_classes() == []
    teach(lr, [2.0] * 3)
    await lr.flush(store)
    assert (await stored(store)).count == 8
    assert lr.shown[KEY].count == 8


async def test_a_class_held_but_not_learned_here_follows_the_peer(store: Store) -> None:
    clock = FakeClock()
    a, b = learner(clock), learner(clock)
    teach(a, [4.0] * 12, work_class="fn.b")
    await a.flush(store)
    assert await b.load(store) == 1  # b holds fn.b from the store from now on
    teach(a, [4.0] * 8, work_class="fn.b")
    await a.flush(store)
    await b.flush(store)
    assert b.shown["default", "function_job", "fn.b"].count == 20
