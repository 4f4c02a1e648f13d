"""CRON expressions as Moltaro schedules use them (5 fields, or 6 with seconds first, as Cronos)."""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

_MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_abbr) if m}
_DAYS = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
_SEARCH_LIMIT = timedelta(days=366 * 5)


class CronError(ValueError):
    """The CRON expression is not valid."""


def _field(text: str, lo: int, hi: int, names: dict[str, int] | None = None) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        step = 1
        if "/" in part:
            part, step_text = part.split("/", 1)
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"bad step in {text!r}")
            step = int(step_text)
        if part in ("*", "?"):
            start, end = lo, hi
        elif "-" in part:
            a, b = part.split("-", 1)
            start, end = _atom(a, names), _atom(b, names)
        else:
            start = _atom(part, names)
            end = hi if step > 1 else start
        if not (lo <= start <= hi and lo <= end <= hi) or start > end:
            raise CronError(f"{text!r} is out of range {lo}-{hi}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


def _atom(text: str, names: dict[str, int] | None) -> int:
    if text.isdigit():
        return int(text)
    if names and text.lower() in names:
        return names[text.lower()]
    raise CronError(f"bad value {text!r}")


@dataclass(frozen=True, slots=True)
class Cron:
    expression: str
    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool
    any_weekday: bool

    @classmethod
    def parse(cls, expression: str) -> Cron:
        parts = expression.split()
        if len(parts) == 5:
            parts = ["0", *parts]
        if len(parts) != 6:
            raise CronError("a CRON expression has 5 fields, or 6 with seconds first")
        sec, minute, hour, day, month, weekday = parts
        weekdays = _field(weekday, 0, 7, _DAYS)
        return cls(
            expression=expression,
            seconds=_field(sec, 0, 59),
            minutes=_field(minute, 0, 59),
            hours=_field(hour, 0, 23),
            days=_field(day, 1, 31),
            months=_field(month, 1, 12, _MONTHS),
            weekdays=frozenset(d % 7 for d in weekdays),
            any_day=day in ("*", "?"),
            any_weekday=weekday in ("*", "?"),
        )

    def _day_matches(self, dt: datetime) -> bool:
        day_ok = dt.day in self.days
        weekday_ok = (dt.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return day_ok and weekday_ok
        return day_ok or weekday_ok  # classic cron: both restricted means either

    def next_after(self, ts: float, tz: str = "UTC") -> float | None:
        """The first occurrence strictly after unix time ``ts``, or None within five years."""
        zone = UTC if tz.upper() == "UTC" else ZoneInfo(tz)
        start = datetime.fromtimestamp(int(ts) + 1, zone).replace(tzinfo=None)
        dt, limit = start, start + _SEARCH_LIMIT
        while dt <= limit:
            if dt.month not in self.months:
                dt = (dt.replace(day=1) + timedelta(days=32)).replace(
                    day=1, hour=0, minute=0, second=0
                )
            elif not self._day_matches(dt):
                dt = (dt + timedelta(days=1)).replace(hour=0, minute=0, second=0)
            elif dt.hour not in self.hours:
                dt = (dt + timedelta(hours=1)).replace(minute=0, second=0)
            elif dt.minute not in self.minutes:
                dt = (dt + timedelta(minutes=1)).replace(second=0)
            elif dt.second not in self.seconds:
                dt += timedelta(seconds=1)
            else:
                return dt.replace(tzinfo=zone).timestamp()
        return None
