"""Time-ordered indexes of jobs, run starts and skipped occurrences, per filter value.

A filtered list reads one series (the one with the fewest rows in its time
window) and applies every filter to those rows only; the lists stay exact
because the series only ever holds a superset of the matches.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from operator import attrgetter, itemgetter
from typing import Generic, TypeVar

from orchestrator.simulator.model import Job, JobMeta

T = TypeVar("T")
Key = tuple[str, object]
ALL: Key = ("all", None)

# The fields a job is listed under, by filter name; indexing another filter is
# one row here and its value in listing.Filters.index_keys.
JOB_FIELDS: tuple[tuple[str, Callable[[JobMeta], object]], ...] = (
    ("function", attrgetter("business_function_id")),
    ("function", attrgetter("function_key")),
    ("schedule", attrgetter("schedule_id")),
    ("binding", attrgetter("trigger_binding_id")),
    ("action", attrgetter("action_id")),
    ("entity", attrgetter("entity_id")),
)

# A run's StartedAt is its start cut to the millisecond, so windows over the raw
# starts are widened by more than that to hold every row the wire value matches.
RUN_SLACK_S = 0.002

_first = itemgetter(0)


def job_keys(meta: JobMeta) -> set[Key]:
    keys = {ALL}
    for name, get in JOB_FIELDS:
        value = get(meta)
        if value is not None:
            keys.add((name, value))
    return keys


def skipped_keys(business_function_id: str, schedule_id: str) -> set[Key]:
    # A skipped occurrence has no job: FunctionId matches its BusinessFunctionId only.
    return {ALL, ("function", business_function_id), ("schedule", schedule_id)}


class Series(Generic[T]):
    """Items in time order, equal times in the order added; a later item is just appended."""

    __slots__ = ("items", "times")

    def __init__(self) -> None:
        self.times: list[float] = []
        self.items: list[T] = []

    def add(self, t: float, item: T) -> None:
        if not self.times or t >= self.times[-1]:
            self.times.append(t)
            self.items.append(item)
        else:
            i = bisect.bisect_right(self.times, t)
            self.times.insert(i, t)
            self.items.insert(i, item)

    def window(self, start: float | None, end: float | None) -> tuple[int, int]:
        """The slice of items with start <= time <= end (either bound optional)."""
        lo = 0 if start is None else bisect.bisect_left(self.times, start)
        hi = len(self.times) if end is None else bisect.bisect_right(self.times, end)
        return lo, max(lo, hi)


class TimeIndex(Generic[T]):
    def __init__(self) -> None:
        self._series: dict[Key, Series[T]] = {}

    def add(self, keys: Iterable[Key], t: float, item: T) -> None:
        for key in keys:
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = Series()
            series.add(t, item)

    def select(self, keys: Iterable[Key], start: float | None, end: float | None) -> list[T]:
        """The items in [start, end] of the narrowest series among ``keys`` (ALL if none).

        Every item listed under all of ``keys`` in the window is in the answer, but
        not every item answered is: the caller still applies each filter.
        """
        best: tuple[Series[T], int, int] | None = None
        for key in list(keys) or [ALL]:
            series = self._series.get(key)
            if series is None:
                return []
            lo, hi = series.window(start, end)
            if best is None or hi - lo < best[2] - best[1]:
                best = (series, lo, hi)
        assert best is not None
        series, lo, hi = best
        return series.items[lo:hi]

    def clear(self) -> None:
        self._series.clear()


class JobIndex:
    """Every job by CreatedAt and by each of its run starts, numbered in the order added."""

    def __init__(self) -> None:
        self._added = 0
        self.created: TimeIndex[tuple[int, Job]] = TimeIndex()
        self.started: TimeIndex[tuple[int, Job]] = TimeIndex()
        self.unplaced: TimeIndex[tuple[int, Job]] = TimeIndex()  # run starts not known

    def add(self, job: Job) -> None:
        entry = (self._added, job)
        self._added += 1
        keys = job_keys(job.meta)
        self.created.add(keys, job.meta.created_at, entry)
        starts = job.run_starts()
        if starts is None:
            self.unplaced.add(keys, 0.0, entry)
            return
        for t in sorted(set(starts)):
            self.started.add(keys, t, entry)

    def jobs(self, keys: list[Key], start: float | None, end: float | None) -> list[Job]:
        """Jobs that may match, created in [start, end], the last added first."""
        rows = self.created.select(keys, start, end)
        rows.sort(key=_first, reverse=True)
        return [job for _, job in rows]

    def run_jobs(self, keys: list[Key], start: float | None, end: float | None) -> list[Job]:
        """Jobs that may have a run started in [start, end], in the order added, once each."""
        lo = None if start is None else start - RUN_SLACK_S
        hi = None if end is None else end + RUN_SLACK_S
        rows = self.started.select(keys, lo, hi) + self.unplaced.select(keys, None, None)
        unique = dict(rows)
        return [unique[n] for n in sorted(unique)]

    def clear(self) -> None:
        self._added = 0
        for index in (self.created, self.started, self.unplaced):
            index.clear()
