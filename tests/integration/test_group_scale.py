"""A group of 100,000 members on the SQL stores: one event, exact counts. Nothing of a
group's members is held in memory (one row of counters; members carry its name)."""

from __future__ import annotations

from collections import Counter

import pytest

from orchestrator.store import Finish, MemoryStore, NewEvent, Store
from orchestrator.store.groups import GroupEnd, SealGroup
from tests.unit.test_store_contract import event, new, store  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow

MEMBERS = 100_000
CHUNK = 1000
OUTCOMES = ("succeeded", "failed", "cancelled")


def group_event(end: GroupEnd) -> NewEvent:
    g = end.group
    return NewEvent(f"grp-{g.name}", None, f"com.moltaro.orchestrator.group.{g.outcome}",
                    g.ended_at or 0.0, b"{}", ["sink:default"], sink=f"group:{g.name}")  # fmt: skip


async def test_a_group_of_100000_members(store: Store) -> None:  # noqa: F811
    if isinstance(store, MemoryStore):
        pytest.skip("the memory store holds everything in memory by design")
    for start in range(0, MEMBERS, CHUNK):
        await store.create_trackings(
            [new(i, group_name="big") for i in range(start, start + CHUNK)]
        )
    await store.seal_group(SealGroup("big", 1_500.0, group_event))
    planned: Counter[str] = Counter()
    for start in range(0, MEMBERS, CHUNK):
        items = []
        for i in range(start, start + CHUNK):
            outcome = OUTCOMES[i % 3] if i % 50 == 0 else "succeeded"
            planned[outcome] += 1
            items.append(Finish(f"trk_{i}", outcome, 2_000.0 + i, None,  # type: ignore[arg-type]
                                event(f"e-{i}", f"trk_{i}"), group_name="big",
                                group_event=group_event))  # fmt: skip
        assert all(await store.finish(items))
    g = await store.get_group("big")
    assert g is not None and g.state == "completed"
    assert g.members == g.ended == MEMBERS
    assert {k: v for k, v in g.outcomes.items() if v} == dict(planned)
    assert (g.first_end_at, g.last_end_at) == (2_000.0, 2_000.0 + MEMBERS - 1)
    events = []
    after = 0
    while page := await store.events_after(after, 10_000):
        events += [e.type for e in page if ".group." in e.type]
        after = page[-1].seq
    assert events == ["com.moltaro.orchestrator.group.completed"]
