"""The store's groups, on every backend: counters, seals, and exactly one group event,
decided in the transaction of the last member's end (or the seal, or the deadline)."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.errors import GroupSealed
from orchestrator.store import Finish, NewEvent, Store, TrackingQuery
from orchestrator.store.groups import GroupEnd, SealGroup
from tests.unit.test_store_contract import event, new, store  # noqa: F401 (the fixture)

ENDS: list[GroupEnd] = []


def group_event(end: GroupEnd) -> NewEvent:
    ENDS.append(end)
    g = end.group
    return NewEvent(
        event_id=f"grp-{g.name}-{g.outcome}",
        tracking_id=None,
        type=f"com.moltaro.orchestrator.group.{g.outcome}",
        time=g.ended_at or 0.0,
        payload=b"{}",
        destinations=["sink:default"],
        sink=f"group:{g.name}",  # what an event of no tracking is about
    )


def finish(tid: str, outcome: str = "succeeded", at: float = 3_000.0) -> Finish:
    return Finish(
        tracking_id=tid,
        outcome=outcome,  # type: ignore[arg-type]
        terminal_at=at,
        result={"error_summary": "boom"} if outcome != "succeeded" else None,
        event=event(f"e-{tid}", tid),
        group_name="g1",
        group_event=group_event,
    )


def seal(name: str = "g1", at: float = 2_500.0, **kw: Any) -> SealGroup:
    return SealGroup(name=name, at=at, event=group_event, **kw)


async def group_events(s: Store) -> list[str]:
    return [e.type for e in await s.events_after(0, 1000) if ".group." in e.type]


async def test_the_last_members_end_emits_exactly_one_event(store: Store) -> None:  # noqa: F811
    items = [new(i, group_name="g1") for i in range(5)]
    await store.create_trackings(items)
    sealed = await store.seal_group(seal(traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01"))
    assert sealed is not None and sealed.members == 5 and sealed.state == "sealed"
    outcomes = ["succeeded", "failed", "succeeded", "cancelled", "succeeded"]
    for i, outcome in enumerate(outcomes[:4]):
        assert await store.finish([finish(f"trk_{i}", outcome, 3_000.0 + i)]) == [True]
        assert await group_events(store) == []
    assert await store.finish([finish("trk_4", "succeeded", 3_010.0)]) == [True]
    assert await group_events(store) == ["com.moltaro.orchestrator.group.completed"]
    g = await store.get_group("g1")
    assert g is not None and g.state == "completed" and g.ended == 5
    assert g.outcomes["succeeded"] == 3 and g.outcomes["failed"] == 1
    assert (g.first_end_at, g.last_end_at) == (3_000.0, 3_010.0)
    assert g.traceparent is not None and g.traceparent.startswith("00-aaa")
    end = ENDS[-1]
    assert sorted(m.outcome or "" for m in end.listed) == ["cancelled", "failed"]
    # Sealing again, or a finish already written, changes nothing.
    assert (await store.seal_group(seal(at=9_000.0))).sealed_at == 2_500.0  # type: ignore[union-attr]
    assert await store.finish([finish("trk_4")]) == [False]
    assert len(await group_events(store)) == 1


async def test_sealing_after_every_member_ended_emits_at_once(store: Store) -> None:  # noqa: F811
    await store.create_trackings([new(i, group_name="g1") for i in range(3)])
    for i in range(3):
        await store.finish([finish(f"trk_{i}")])
    assert await group_events(store) == []
    await store.seal_group(seal())
    assert await group_events(store) == ["com.moltaro.orchestrator.group.completed"]
    await store.seal_group(seal())
    assert len(await group_events(store)) == 1


async def test_a_sealed_group_takes_no_new_member_and_nothing_is_written(store: Store) -> None:  # noqa: F811
    await store.create_trackings([new(1, group_name="g1")])
    await store.seal_group(seal())
    with pytest.raises(GroupSealed):
        await store.create_trackings([new(2), new(3, group_name="g1")])
    assert await store.get_tracking("trk_2") is None
    # The same tracking again is no new member: answered as it is.
    [(again, created)] = await store.create_trackings([new(1, group_name="g1")])
    assert not created and again.group_name == "g1"
    g = await store.get_group("g1")
    assert g is not None and g.members == 1


async def test_expect_seals_at_its_count(store: Store) -> None:  # noqa: F811
    await store.create_trackings([new(1, group_name="g1", group_expect=2)])
    g = await store.get_group("g1")
    assert g is not None and g.state == "open" and g.expect == 2
    await store.create_trackings([new(2, group_name="g1")])
    g = await store.get_group("g1")
    assert g is not None and g.state == "sealed"
    with pytest.raises(GroupSealed):
        await store.create_trackings([new(3, group_name="g1")])


async def test_an_empty_sealed_group_ends_at_once(store: Store) -> None:  # noqa: F811
    await store.create_trackings([], seal(name="empty"))
    g = await store.get_group("empty")
    assert g is not None and g.state == "completed" and g.members == 0
    assert await group_events(store) == ["com.moltaro.orchestrator.group.completed"]


async def test_a_group_deadline_names_the_open_members(store: Store) -> None:  # noqa: F811
    await store.create_trackings([new(i, group_name="g1") for i in range(3)])
    await store.finish([finish("trk_0", "failed")])
    await store.seal_group(seal(deadline_at=4_000.0))
    assert await store.next_group_deadline() == 4_000.0
    assert await store.expire_groups(3_999.0, group_event) == []
    [ended] = await store.expire_groups(4_000.0, group_event)
    assert ended.state == "deadline_exceeded"
    assert sorted(m.tracking_id for m in ENDS[-1].listed) == ["trk_1", "trk_2"]
    assert await store.expire_groups(5_000.0, group_event) == []
    # Its members go on; their ends are counted, and no second event comes.
    await store.finish([finish("trk_1"), finish("trk_2")])
    assert await group_events(store) == ["com.moltaro.orchestrator.group.deadline_exceeded"]
    assert await store.next_group_deadline() is None


async def test_groups_list_by_state_and_members_by_group(store: Store) -> None:  # noqa: F811
    for name in ("a", "b", "c"):
        await store.create_trackings([new(f"{name}{i}", group_name=name) for i in range(2)])
    await store.seal_group(seal(name="b"))
    page, cursor = await store.list_groups(None, 2, None)
    assert [g.name for g in page] == ["a", "b"] and cursor is not None
    rest, end = await store.list_groups(None, 2, cursor)
    assert [g.name for g in rest] == ["c"] and end is None
    sealed, _ = await store.list_groups("sealed", 10, None)
    assert [g.name for g in sealed] == ["b"]
    items, _ = await store.list_trackings(TrackingQuery(group="c"))
    assert sorted(t.tracking_id for t in items) == ["trk_c0", "trk_c1"]
    assert await store.get_group("nope") is None
