"""The tracker's rules, on a MemoryStore and an engine that only records what it is asked."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from orchestrator.errors import (
    AlreadyTerminal,
    EndedMeanwhile,
    NotAFunctionJob,
    TrackingNotFound,
    UnknownWorkspace,
)
from orchestrator.metrics import Metrics
from orchestrator.store import (
    Finish,
    MemoryStore,
    NewEvent,
    NewTracking,
    Tracking,
    TrackingQuery,
)
from orchestrator.tracker import Tracker


@dataclass
class RecordingEngine:
    added: list[str] = field(default_factory=list)
    entries: dict[str, Any] = field(default_factory=dict)  # none: the engine let go of all
    clients: dict[str, Any] = field(default_factory=dict)

    def add(self, t: Tracking, work_class: str | None = None) -> None:
        self.added.append(t.tracking_id)

    def live(self, t: Tracking) -> Tracking:
        return replace(t, polls=99)

    async def abandon(self, tracking_id: str) -> Tracking | None:
        return None

    async def cancel(self, tracking_id: str) -> None:
        return None  # no longer held: it ended meanwhile

    async def stop_retries(self, tracking_id: str, expected: str | None) -> None:
        return None


@pytest.fixture
async def store() -> AsyncIterator[MemoryStore]:
    backend = MemoryStore()
    await backend.open()
    yield backend
    await backend.close()


def new(n: int, kind: str = "function_job") -> NewTracking:
    return NewTracking(
        tracking_id=f"trk_{n}",
        workspace="default",
        kind=kind,
        remote_id=f"R-{n}",
        deadline_at=10_000.0,
        created_at=1_000.0,
        next_poll_at=1_001.0,
    )


def tracker(store: MemoryStore) -> tuple[Tracker, RecordingEngine, Metrics]:
    engine, metrics = RecordingEngine(), Metrics()
    return Tracker(engine, store, metrics), engine, metrics  # type: ignore[arg-type]


async def test_track_polls_and_counts_only_the_new_ones(store: MemoryStore) -> None:
    t, engine, metrics = tracker(store)
    first = await t.track([new(1), new(2, "workspace_ui_build")])
    again = await t.track([replace(new(3), remote_id="R-1")])

    assert [created for _, created in first] == [True, True]
    assert again[0] == (first[0][0], False)
    assert engine.added == ["trk_1", "trk_2"]
    created = "orchestrator_trackings_created_total"
    labels = {"workspace": "default", "kind": "function_job"}
    assert metrics.registry.get_sample_value(created, labels) == 1
    assert await t.track([]) == []


async def test_queries_show_the_engines_counters(store: MemoryStore) -> None:
    t, _, _ = tracker(store)
    await t.track([new(1)])
    assert (await t.get("trk_1")).polls == 99
    items, cursor = await t.list(TrackingQuery())
    assert [x.polls for x in items] == [99] and cursor is None
    with pytest.raises(TrackingNotFound):
        await t.get("trk_404")


async def test_only_an_active_function_job_can_be_cancelled(store: MemoryStore) -> None:
    t, _, _ = tracker(store)
    await t.track([new(1), new(2, "net_operation_build"), new(3)])
    event = NewEvent("e3", "trk_3", "com.moltaro.orchestrator.tracking.failed", 2_000.0, b"{}")
    await store.finish([Finish("trk_3", "failed", 2_000.0, None, event)])

    with pytest.raises(NotAFunctionJob):
        await t.cancel("trk_2")
    with pytest.raises(AlreadyTerminal) as ended:
        await t.stop_retries("trk_3", None)
    assert ended.value.outcome == "failed" and not isinstance(ended.value, EndedMeanwhile)
    with pytest.raises(EndedMeanwhile):  # the store still says active; the engine let go
        await t.cancel("trk_1")
    with pytest.raises(TrackingNotFound):
        await t.cancel("trk_404")


async def test_abandoning_an_ended_tracking_names_its_outcome(store: MemoryStore) -> None:
    t, _, _ = tracker(store)
    await t.track([new(1)])
    with pytest.raises(AlreadyTerminal) as ended:  # active in the store, gone from the engine
        await t.abandon("trk_1")
    assert ended.value.outcome is None


async def test_execution_model_of_an_unknown_workspace(store: MemoryStore) -> None:
    t, _, _ = tracker(store)
    with pytest.raises(UnknownWorkspace):
        await t.execution_model("elsewhere", "billing.sync")
