"""Adaptive polling's pure parts: a work's class and its class's durations (the plan
from them: ``plan.py``).

Class: a function job's FunctionKey, a build's build kind (``Build`` or
``Check``, by name; its kind already names the project type). The times are the
work's own: created, and ended (a run's CompletedAt, else the body's
CompletedAt, else its ModifiedAt on a terminal body), so a learned duration
does not include how late we read it.

Durations: one class's as a decayed histogram, bounded, mergeable, plain JSON.
Bins are log-spaced (each about 9% wider than the last) from 0.05 s to about
19 days, so a tight class of 2 s and one of an hour are both resolved to a few
percent. Each new sample multiplies the older weights by ``2 ** (-1 /
half_life)``: recent work weighs more, an outlier fades, and weights that fall
below ``EPSILON`` are dropped, which bounds the bins kept to those in use.

No clock, no I/O: the learner (``learner.py``) holds the state.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# -- durations ------------------------------------------------------------------------

MIN_S = 0.05
_LOG_RATIO = math.log(2.0) / 8  # eight bins per doubling
NBINS = 200
EPSILON = 1e-3
# The planner reads between these quantiles; work beyond them is an outlier.
LOW_Q = 0.005
HIGH_Q = 0.99
# How fast the share of surprising samples (outside those quantiles) follows them.
_SURPRISE_ALPHA = 0.1
# Above this share, the class behaves unlike its history: back to the backoff.
SURPRISE_LIMIT = 0.25


def edge(i: int) -> float:
    """The lower edge of bin ``i`` (bin 0 starts at 0)."""
    return 0.0 if i <= 0 else MIN_S * math.exp(i * _LOG_RATIO)


def bin_of(seconds: float) -> int:
    if not seconds > MIN_S:  # also NaN
        return 0
    return min(NBINS - 1, int(math.log(seconds / MIN_S) / _LOG_RATIO))


class DurationSketch:
    __slots__ = ("bins", "count", "surprise")

    def __init__(
        self, bins: dict[int, float] | None = None, count: int = 0, surprise: float = 0.0
    ) -> None:
        self.bins: dict[int, float] = bins if bins is not None else {}
        self.count = count  # samples ever added (not decayed)
        self.surprise = surprise  # decayed share of recent samples outside [LOW_Q, HIGH_Q]

    @property
    def weight(self) -> float:
        return sum(self.bins.values())

    @property
    def mean(self) -> float:
        """The weighted mean duration, each bin at its middle (0 when empty)."""
        total = self.weight
        if total <= 0:
            return 0.0
        return sum(w * (edge(i) + edge(i + 1)) / 2 for i, w in self.bins.items()) / total

    @property
    def settled(self) -> bool:
        return self.surprise <= SURPRISE_LIMIT

    def surprising(self, seconds: float) -> bool | None:
        """Whether ``seconds`` lies outside this history's range (None: no history yet).
        A sample within a bin of the range's ends is not a surprise."""
        if not self.bins:
            return None
        lo, hi = self.quantile(LOW_Q), self.quantile(HIGH_Q)
        return seconds < lo * math.exp(-_LOG_RATIO) or seconds > hi * math.exp(_LOG_RATIO)

    def side(self, seconds: float) -> int:
        """+1 above this history's range, -1 below it, 0 within it or with no history;
        +-2 more than a doubling beyond it (stronger evidence of a change)."""
        if not self.surprising(seconds):
            return 0
        hi = self.quantile(HIGH_Q)
        if seconds > hi:
            return 2 if seconds > 2.0 * hi else 1
        return -2 if seconds < 0.5 * self.quantile(LOW_Q) else -1

    def add(
        self, seconds: float, half_life: float, judged_by: DurationSketch | None = None
    ) -> None:
        """One more finished duration; the older ones weigh a little less. Its surprise
        is judged by ``judged_by``'s history (default this one): a delta since the last
        flush has too few samples of its own to judge by."""
        if not math.isfinite(seconds) or seconds < 0:
            return
        out = (self if judged_by is None else judged_by).surprising(seconds)
        if out is not None:
            self.surprise += _SURPRISE_ALPHA * ((1.0 if out else 0.0) - self.surprise)
        keep = 2.0 ** (-1.0 / half_life)
        self.bins = {i: w * keep for i, w in self.bins.items() if w * keep >= EPSILON}
        i = bin_of(seconds)
        self.bins[i] = self.bins.get(i, 0.0) + 1.0
        self.count += 1

    def copy(self) -> DurationSketch:
        return DurationSketch(dict(self.bins), self.count, self.surprise)

    def merge(self, other: DurationSketch) -> None:
        for i, w in other.bins.items():
            self.bins[i] = self.bins.get(i, 0.0) + w
        self.count += other.count

    def quantile(self, q: float) -> float:
        """The duration below which a share ``q`` of the weight lies (0 when empty)."""
        total = self.weight
        if total <= 0:
            return 0.0
        want = min(max(q, 0.0), 1.0) * total
        seen = 0.0
        for i in sorted(self.bins):
            w = self.bins[i]
            if seen + w >= want:
                lo, hi = edge(i), edge(i + 1)
                return lo + (hi - lo) * ((want - seen) / w if w > 0 else 0.0)
            seen += w
        return edge(max(self.bins) + 1)

    def segments(
        self, lo_q: float = LOW_Q, hi_q: float = HIGH_Q
    ) -> list[tuple[float, float, float]]:
        """(start, end, weight) of each bin between the two quantiles, in order, with the
        weight spread evenly over each bin and the outer bins clipped."""
        if not self.bins:
            return []
        lo, hi = self.quantile(lo_q), self.quantile(hi_q)
        out: list[tuple[float, float, float]] = []
        for i in sorted(self.bins):
            x, y, w = edge(i), edge(i + 1), self.bins[i]
            a, b = max(x, lo), min(y, hi)
            if b <= a:
                if x <= lo <= y and lo == hi:  # all the weight in one point
                    out.append((lo, lo + 1e-6, w))
                continue
            out.append((a, b, w * (b - a) / (y - x)))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "v": 1,
            "n": self.count,
            "s": round(self.surprise, 6),
            "b": {str(i): round(w, 6) for i, w in sorted(self.bins.items())},
        }

    @classmethod
    def from_json(cls, raw: Any) -> DurationSketch:
        """A sketch from ``to_json``'s output; anything unreadable is an empty one."""
        if not isinstance(raw, Mapping) or raw.get("v") != 1:
            return cls()
        bins: dict[int, float] = {}
        stored = raw.get("b")
        for key, w in stored.items() if isinstance(stored, Mapping) else ():
            if isinstance(key, str) and key.isdigit() and isinstance(w, int | float):
                i = int(key)
                if 0 <= i < NBINS and math.isfinite(w) and w >= EPSILON:
                    bins[i] = float(w)
        n, s = raw.get("n"), raw.get("s")
        count = n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else len(bins)
        surprise = float(s) if isinstance(s, int | float) and 0 <= s <= 1 else 0.0
        return cls(bins, count, surprise)


def merged(base: DurationSketch, delta: DurationSketch, half_life: float) -> DurationSketch:
    """``delta``'s samples (kept from empty with the same ``half_life``) added after all of
    ``base``'s: the base's weights decay one step per sample of the delta, its surprise
    likewise, so the result is what adding them one by one would have given."""
    k = delta.count
    keep = 2.0 ** (-k / half_life)
    bins = {i: w * keep for i, w in base.bins.items() if w * keep >= EPSILON}
    for i, w in delta.bins.items():
        bins[i] = bins.get(i, 0.0) + w
    surprise = base.surprise * (1.0 - _SURPRISE_ALPHA) ** k + delta.surprise
    return DurationSketch(bins, base.count + k, min(1.0, surprise))
