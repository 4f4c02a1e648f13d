"""CRON expressions: 5 fields, or 6 with seconds first (as the .NET Cronos library)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from orchestrator.simulator.cron import Cron, CronError


def ts(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


def test_six_fields_with_seconds() -> None:
    cron = Cron.parse("*/2 * * * * *")
    assert cron.next_after(ts(2026, 1, 1, 0, 0, 0)) == ts(2026, 1, 1, 0, 0, 2)
    assert cron.next_after(ts(2026, 1, 1, 0, 0, 1)) == ts(2026, 1, 1, 0, 0, 2)
    assert cron.next_after(ts(2026, 1, 1, 0, 0, 58)) == ts(2026, 1, 1, 0, 1, 0)


def test_five_fields_are_at_second_zero() -> None:
    cron = Cron.parse("30 2 * * *")
    assert cron.next_after(ts(2026, 1, 1, 2, 30, 0)) == ts(2026, 1, 2, 2, 30, 0)
    assert cron.next_after(ts(2026, 1, 1, 1, 0, 0)) == ts(2026, 1, 1, 2, 30, 0)


def test_names_ranges_lists_and_day_rules() -> None:
    assert Cron.parse("0 9 * * MON-FRI").next_after(ts(2026, 1, 3, 0, 0)) == ts(2026, 1, 5, 9, 0)
    assert Cron.parse("0 0 1 JAN,JUL *").next_after(ts(2026, 2, 1)) == ts(2026, 7, 1)
    assert Cron.parse("0 0 29 2 *").next_after(ts(2026, 1, 1)) == ts(2028, 2, 29)
    # Day-of-month and day-of-week both restricted: either matches (classic cron).
    assert Cron.parse("0 0 13 * 5").next_after(ts(2026, 1, 1)) == ts(2026, 1, 2)
    assert Cron.parse("0 0 * * 7").next_after(ts(2026, 1, 1)) == ts(2026, 1, 4)  # 7 is Sunday


def test_time_zones() -> None:
    # 03:00 in Paris in January is 02:00 UTC.
    assert Cron.parse("0 3 * * *").next_after(ts(2026, 1, 1), "Europe/Paris") == ts(2026, 1, 1, 2)


@pytest.mark.parametrize(
    "expression",
    ["", "* * * *", "60 * * * *", "* * * * * * *", "*/0 * * * *", "5-1 * * * *", "a b c d e"],
)
def test_invalid(expression: str) -> None:
    with pytest.raises(CronError):
        Cron.parse(expression)


def test_never_is_none() -> None:
    assert Cron.parse("0 0 30 2 *").next_after(ts(2026, 1, 1)) is None
