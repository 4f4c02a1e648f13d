"""Adaptive polling's pure parts: a work's class, its class's durations, the plan.

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

Planner: from the histogram, one grid of read times, in seconds after the
work's creation: each read is placed as late as it can be while the mean delay
between the end of the work that ends since the previous read and this read
stays within the detection target. Where work is unlikely to end (before the
class's shortest durations, between two modes) the grid has no reads at all. A
tracking reads at the first grid point after its current age; past the grid's
end it has outlived its class, and the backoff takes over. The grid never
spends more reads than the backoff would over the same span: where it would,
the target is relaxed for that class. Every other rule (NextRunAt, Retry-After,
the deadline, the 404 window, the rate limit, ``max_delay_s``) still applies on
top, in ``decide()``.

No clock, no I/O: the learner (``learner.py``) holds the state.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.config import PollingConfig
from orchestrator.interpret import EnumMap
from orchestrator.interpret._read import as_int, as_mapping, as_timestamp, get_ci
from orchestrator.vocabulary import BUILD_CLASSES

# -- the work's class and times -------------------------------------------------------

# A class becomes a metric label value: printable, short, no spaces.
CLASS_RE = re.compile(r"[A-Za-z0-9._:/@+-]{1,200}")


@dataclass(frozen=True, slots=True)
class WorkTimes:
    work_class: str | None
    created_at: float | None
    ended_at: float | None


def work_times(kind: str, body: Any, enums: EnumMap) -> WorkTimes:
    """The class and times a status body shows (None for what it does not). Never raises."""
    model = as_mapping(body)
    if model is None:
        return WorkTimes(None, None, None)
    if get_ci(model, "Status") is None:
        model = as_mapping(get_ci(model, "Data")) or model
    created = as_timestamp(get_ci(model, "CreatedAt"))
    run = as_mapping(get_ci(model, "Run"))
    ended = (
        as_timestamp(get_ci(run, "CompletedAt"))
        or as_timestamp(get_ci(model, "CompletedAt"))
        or as_timestamp(get_ci(model, "ModifiedAt"))
    )
    if kind == "function_job":
        key = get_ci(model, "FunctionKey")
        cls = key if isinstance(key, str) and CLASS_RE.fullmatch(key) else None
    else:
        cls = build_kind(get_ci(model, "Kind"), enums)
    return WorkTimes(cls, created, ended)


def build_kind(raw: Any, enums: EnumMap) -> str | None:
    """``Build`` or ``Check`` from the body's Kind (a number through the enum map, or a name)."""
    number = as_int(raw)
    name = enums.values.get("kind", {}).get(number) if number is not None else raw
    if not isinstance(name, str):
        return None
    folded = name.strip().casefold()
    return next((k for k in BUILD_CLASSES if k.casefold() == folded), None)


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


# -- the planner ----------------------------------------------------------------------

Segment = tuple[float, float, float]  # (start s, end s, weight), weight spread evenly
_RELAX = 1.5
_MAX_RELAXATIONS = 12


def read_grid(segments: Sequence[Segment], target: float) -> list[float]:
    """Read times (seconds of age) over ``segments``, ordered, with the mean delay of
    the weight between two reads at most ``target``; empty with no weight."""
    grid: list[float] = []
    mass = moment = 0.0  # weight since the last read, and its first moment
    for x, y, w in segments:
        if w <= 0 or y <= x:
            continue
        if mass > 0 and moment / mass + target < x:  # the gap before x is long enough
            grid.append(moment / mass + target)
            mass = moment = 0.0
        rho = w / (y - x)
        a = x
        while True:
            r = _crossing(mass, moment, rho, a, target)
            if r > y:
                mass += rho * (y - a)
                moment += rho * (y * y - a * a) / 2
                break
            grid.append(r)  # the next interval starts empty at r
            mass = moment = 0.0
            a = r
    if mass > 0:
        grid.append(moment / mass + target)
    return grid


def _crossing(mass: float, moment: float, rho: float, a: float, target: float) -> float:
    """Where the mean delay of the weight since the last read reaches ``target``, as the
    weight keeps arriving at density ``rho`` from ``a``: the larger root of
    ``(u - T) M(u) - S(u) = 0``, which is convex in u and not positive at ``a``."""
    qa = rho / 2
    qb = mass - rho * a - rho * target
    qc = -target * (mass - rho * a) - moment + rho * a * a / 2
    if qa <= 1e-15:
        return math.inf if qb <= 0 else -qc / qb
    disc = max(0.0, qb * qb - 4 * qa * qc)
    return max(a, (-qb + math.sqrt(disc)) / (2 * qa))


def backoff_reads(span: float, p: PollingConfig, limit: int) -> int:
    """The plain backoff's reads in ``span`` seconds (the count stops past ``limit``)."""
    t = gap = p.initial_delay_s
    reads = 1
    while t < span and reads <= limit:
        gap = min(gap * p.multiplier, p.max_delay_s)
        t += gap
        reads += 1
    return reads


def plan_grid(sketch: DurationSketch, target: float, p: PollingConfig) -> tuple[float, ...]:
    """The class's read grid: the target's, or a relaxed one that reads no more than
    the backoff would over the same span."""
    segments = sketch.segments()
    grid: list[float] = []
    for _ in range(_MAX_RELAXATIONS):
        grid = read_grid(segments, target)
        if not grid or len(grid) <= backoff_reads(grid[-1], p, len(grid)):
            break
        target *= _RELAX
    return tuple(grid)


def next_read(grid: Sequence[float], age: float, min_gap: float) -> float | None:
    """The age of the next planned read at least ``min_gap`` after ``age``; None when
    the tracking has outlived the grid (its class's high quantile)."""
    i = bisect.bisect_left(grid, age + min_gap)
    return grid[i] if i < len(grid) else None
