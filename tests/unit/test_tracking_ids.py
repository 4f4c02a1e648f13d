"""Tracking ids: the contract's format, in the order they were made."""

from __future__ import annotations

import re

import pytest

from orchestrator.api import intake
from orchestrator.api.intake import new_tracking_id

FORMAT = re.compile(r"^trk_[0-9a-f]{24}$")


def test_ids_have_the_contract_format_and_are_distinct() -> None:
    ids = [new_tracking_id() for _ in range(10_000)]
    assert all(FORMAT.match(i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_a_later_millisecond_sorts_after_an_earlier_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # Ordered ids keep the store's tracking_id indexes growing at one edge.
    now = [1_764_000_000_000_000_000]
    monkeypatch.setattr(intake.time, "time_ns", lambda: now[0])
    made = []
    for _ in range(200):
        made.append(new_tracking_id())
        now[0] += 1_000_000  # one millisecond
    assert made == sorted(made)
    assert made[0][4:16] == f"{now[0] // 1_000_000 - 200:012x}"
