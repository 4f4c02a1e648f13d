"""Tracking ids: the contract's format, in the order they were made."""

from __future__ import annotations

import re

from orchestrator.api import intake
from orchestrator.api.intake import new_tracking_id

FORMAT = re.compile(r"^trk_[0-9a-f]{24}$")
T0 = 1_764_000_000_000_000_000  # ns


def _ids() -> tuple[list[int], intake.TrackingIds]:
    now = [T0]
    return now, intake.TrackingIds(lambda: now[0])


def test_ids_have_the_contract_format_and_are_distinct() -> None:
    ids = [new_tracking_id() for _ in range(10_000)]
    assert all(FORMAT.match(i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_ids_lead_with_their_millisecond_and_sort_in_the_order_made() -> None:
    # Ordered ids keep the store's tracking_id indexes growing at one edge.
    now, ids = _ids()
    made = []
    for _ in range(200):
        made.append(ids())
        now[0] += 1_000_000  # one millisecond
    assert made == sorted(made) and len(set(made)) == len(made)
    assert made[0][4:16] == f"{T0 // 1_000_000:012x}"
    assert made[-1][4:16] == f"{T0 // 1_000_000 + 199:012x}"


def test_within_one_millisecond_and_when_the_clock_steps_back_ids_still_increase() -> None:
    now, ids = _ids()
    made = [ids() for _ in range(1_000)]  # the clock stands still
    now[0] -= 5_000_000_000  # NTP steps the clock back 5 s
    made += [ids() for _ in range(1_000)]
    assert made == sorted(made) and len(set(made)) == len(made)
    assert all(FORMAT.match(i) for i in made)
    assert {i[4:16] for i in made} == {f"{T0 // 1_000_000:012x}"}


def test_a_millisecond_that_runs_out_of_low_bits_moves_to_the_next() -> None:
    _, ids = _ids()
    first = ids()
    ids._low = (1 << 48) - 1  # the last id this millisecond can name
    after = ids()
    assert after > first and FORMAT.match(after)
    assert int(after[4:16], 16) == T0 // 1_000_000 + 1
