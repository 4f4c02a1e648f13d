"""Adaptive polling's plan: from a class's learned durations (``adaptive.py``), when to
read its work.

From the histogram, the grid of read times (seconds after the work's
creation) with the fewest expected reads whose mean delay between the work's end
and the read that sees it is within the detection target, no gap longer than
``max_delay_s``. Where work is unlikely to end the grid has no reads but those
that rule adds. A tracking reads at the next grid point after its current age;
past the grid's end it has outlived its class, and the backoff takes over. A
grid is used only if it costs no more expected reads than the backoff on the
same durations and sees the end no later at the 95th percentile (``cost``);
otherwise the target is relaxed, and failing that the class is the backoff's.
Every other rule (NextRunAt, Retry-After, the deadline, the 404 window, the rate
limit) still applies on top, in ``decide()``.

No clock, no I/O: the learner (``learner.py``) holds the state.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.config import PollingConfig
from orchestrator.engine.adaptive import DurationSketch, edge

# -- the planner ----------------------------------------------------------------------

Segment = tuple[float, float, float]  # (start s, end s, weight), weight spread evenly
_RELAX = 1.5
_MAX_RELAXATIONS = 12
_CANDIDATES = 48  # read ages the planner chooses among (bins merged above that)


def best_grid(segments: Sequence[Segment], target: float, max_gap: float) -> list[float]:
    """The fewest expected reads of any read grid (at the segments' ends, at most
    ``max_gap`` apart) whose mean delay from the work's end to the read that sees it
    is at most ``target``: for a price on delay, a dynamic program over the ends gives
    the grid minimising reads + price x delay; a search on the price finds the
    cheapest grid within the target. Each step from a read at ``y_i`` to one at ``y_j``
    costs every tracking still running a read (and the reads ``max_gap`` adds), and
    the work ending between them its wait until ``y_j``."""
    pieces = [(x, y, w) for x, y, w in segments if w > 0 and y > x]
    if not pieces:
        return []
    # A decayed histogram holds about a hundred samples: smoothed over neighbouring
    # bins, the grid follows the shape rather than where the last samples fell.
    weights = [w for _, _, w in pieces]
    for _ in range(2):
        weights = [
            (weights[max(k - 1, 0)] + 2 * weights[k] + weights[min(k + 1, len(weights) - 1)]) / 4
            for k in range(len(weights))
        ]
    pieces = [(x, y, w) for (x, y, _), w in zip(pieces, weights, strict=True)]
    # A bin is an eighth of a doubling wide: at long durations wider than the delay
    # aimed at, so reads may also fall within it (its weight spread evenly).
    split = []
    for x, y, w in pieces:
        parts = max(1, min(4, math.ceil((y - x) / target)))
        split += [(x + (y - x) * k / parts, x + (y - x) * (k + 1) / parts, w / parts)
                  for k in range(parts)]  # fmt: skip
    pieces = split
    while len(pieces) > _CANDIDATES:  # merge neighbours pairwise, keeping the ends
        pieces = [
            (pieces[k][0], pieces[min(k + 1, len(pieces) - 1)][1],
             sum(w for _, _, w in pieces[k : k + 2]))
            for k in range(0, len(pieces), 2)
        ]  # fmt: skip
    total = sum(w for _, _, w in pieces)
    ends = [0.0] + [y for _, y, _ in pieces]
    seen = [0.0]  # weight ended by each end
    moment = [0.0]  # and its first moment, each piece at its middle
    for x, y, w in pieces:
        seen.append(seen[-1] + w / total)
        moment.append(moment[-1] + w / total * (x + y) / 2)
    n = len(pieces)
    gaps = [[math.ceil((ends[j] - ends[i]) / max_gap - 1e-9) for j in range(n + 1)]
            for i in range(n + 1)]  # fmt: skip

    def solve(price: float) -> tuple[float, list[int]]:
        best = [0.0] + [math.inf] * n
        delay = [0.0] * (n + 1)
        back = [0] * (n + 1)
        for j in range(1, n + 1):
            y = ends[j]
            for i in range(j):
                d = y * (seen[j] - seen[i]) - (moment[j] - moment[i])
                value = best[i] + (1.0 - seen[i]) * gaps[i][j] + price * d
                if value < best[j]:
                    best[j], back[j], delay[j] = value, i, delay[i] + d
        path, j = [], n
        while j > 0:
            path.append(j)
            j = back[j]
        return delay[n], path[::-1]

    lo, hi = 0.0, 1.0
    mean, path = solve(hi)
    while mean > target and hi < 1e6:
        lo, hi = hi, hi * 8
        mean, path = solve(hi)
    for _ in range(14):  # the least price (fewest reads) whose delay is within target
        mid = math.sqrt(lo * hi) if lo > 0 else hi / 8
        d, p = solve(mid)
        if d <= target:
            hi, path = mid, p
        else:
            lo = mid
    return [ends[j] for j in path]


def backoff_count(age: float, p: PollingConfig) -> int:
    """How many reads the plain backoff has made by ``age`` (once per planned read:
    stepped while the delay grows, counted at once when it stays at the maximum)."""
    a, delay, count = p.initial_delay_s, p.initial_delay_s, 0
    while a <= age:
        count += 1
        if count > 1:
            if delay >= p.max_delay_s or p.multiplier <= 1.0:  # the delay no longer grows
                return count + math.floor((age - a) / delay + 1e-9)
            delay = min(delay * p.multiplier, p.max_delay_s)
        a += delay
    return count


def backoff_gap(age: float, p: PollingConfig) -> float:
    """The plain backoff's delay at ``age``: the gap between its two reads around it
    (where a tracking the plan let go of joins it, at the pace it would have by then)."""
    at, gap, reads = 0.0, p.initial_delay_s, 0
    while at + gap <= age and gap < p.max_delay_s and p.multiplier > 1.0:
        at, reads = at + gap, reads + 1
        if reads >= 2:  # the initial delay twice, then multiplied (backoff_ages)
            gap = min(gap * p.multiplier, p.max_delay_s)
    return gap


def backoff_ages(
    start: float, p: PollingConfig, until: float, joined: float | None = None
) -> list[float]:
    """The plain backoff's reads, as ages, for a tracking it starts on at age ``start``
    (``decide()``: the initial delay, again, then multiplied up to ``max_delay_s``), or
    that joins it there at delay ``joined`` (then multiplied: ``Learned.rejoin``)."""
    ages: list[float] = []
    a, delay = start, p.initial_delay_s if joined is None else max(joined, p.initial_delay_s)
    while (not ages or a < until) and len(ages) < 10_000:
        a += delay
        ages.append(a)
        if len(ages) > 1 or joined is not None:
            delay = min(delay * p.multiplier, p.max_delay_s)
    return ages


def capped(grid: Sequence[float], start: float, max_gap: float) -> list[float]:
    """``grid`` with reads added evenly wherever two reads (or ``start`` and the first)
    are more than ``max_gap`` apart: what ``max_delay_s`` makes of the plan anyway, so
    the plan counts those reads and a tracking keeps to its slots."""
    out: list[float] = []
    last = start
    for g in grid:
        if g <= last:
            continue
        parts = math.ceil((g - last) / max_gap - 1e-9)
        out += [last + (g - last) * k / parts for k in range(1, parts)]
        out.append(g)
        last = g
    return out


def next_read(grid: Sequence[float], age: float, min_gap: float) -> float | None:
    """The age of the next planned read after a read at ``age``; None when the tracking
    has outlived the grid. A read nearer to a grid point than half that point's slot has
    served it (the grid moves a little each time it is drawn again), so the next slot's
    point is taken: a tracking never reads twice for one slot."""
    i = bisect.bisect_left(grid, age + min_gap)
    if i < len(grid):
        before = grid[i - 1] if i > 0 else 0.0
        if grid[i] - age < (grid[i] - before) / 2:
            i += 1
    return grid[i] if i < len(grid) else None


# -- what a schedule costs, on the learned durations ----------------------------------


@dataclass(frozen=True, slots=True)
class Cost:
    """A read schedule on a class's durations: expected reads per tracking, the mean
    delay from the work's end to the read that sees it, and how that delay spreads
    (``pieces``: (least, most, weight), each spread evenly; ``p95_delay``)."""

    reads: float
    mean_delay: float
    pieces: tuple[tuple[float, float, float], ...] = ()

    @property
    def p95_delay(self) -> float:
        return delay_quantile(self.pieces, 0.95)


def schedule(grid: Sequence[float], p: PollingConfig, start: float, until: float) -> list[float]:
    """The ages a tracking taken in at age ``start`` is read at, to ``until``: the plan
    (nothing planned: the backoff from the start), and past its end the backoff, joined
    at the pace it has at that age."""
    first = next_read(grid, start, 0.0)
    if first is None:
        return backoff_ages(start, p, until)
    ages = [min(first, start + p.max_delay_s)]
    while ages[-1] < until and len(ages) < 10_000:
        planned = next_read(grid, ages[-1], 0.0)
        if planned is None:
            return ages + backoff_ages(ages[-1], p, until, backoff_gap(ages[-1], p))
        ages.append(min(planned, ages[-1] + p.max_delay_s))
    return ages


def cost(ages: Sequence[float], sketch: DurationSketch) -> Cost:
    """Expected reads and delays of reading at ``ages`` (ascending, reaching past the
    last duration) work whose durations are ``sketch``'s, spread evenly in each bin."""
    total = sketch.weight
    if total <= 0 or not ages:
        return Cost(0.0, 0.0)
    reads = mean = 0.0
    pieces: list[tuple[float, float, float]] = []
    for i in sorted(sketch.bins):
        x, y, w = edge(i), edge(i + 1), sketch.bins[i] / total
        k = bisect.bisect_left(ages, x)  # the first read at or after x
        a = x
        while True:
            r = ages[k] if k < len(ages) else max(y, ages[-1])
            b = min(y, r)
            share = w * (b - a) / (y - x)
            if share > 0:
                reads += share * (k + 1)
                mean += share * (r - (a + b) / 2)
                pieces.append((r - b, r - a, share))
            if b >= y:
                break
            a, k = b, k + 1
    return Cost(reads, mean, tuple(pieces))


def delay_quantile(pieces: Sequence[tuple[float, float, float]], q: float) -> float:
    """The delay below which a share ``q`` of the weight lies (each piece spread evenly
    over [least, most]): one sweep over the pieces' ends, where the weight below grows
    linearly between two ends."""
    total = sum(w for _, _, w in pieces)
    if total <= 0:
        return 0.0
    want = q * total
    ends: list[tuple[float, float]] = []  # (delay, change of density there)
    below = 0.0  # the weight of pieces that are single points, taken as they come
    points: list[tuple[float, float]] = []
    for lo, hi, w in pieces:
        if hi - lo <= 1e-12:
            points.append((lo, w))
        else:
            ends += [(lo, w / (hi - lo)), (hi, -w / (hi - lo))]
    ends += [(at, 0.0) for at, _ in points]
    ends.sort()
    weights = sorted(points)
    density = 0.0
    last = ends[0][0] if ends else 0.0
    j = 0
    for at, change in ends:
        grown = density * (at - last)
        if below + grown >= want:
            return last + (want - below) / density if density > 0 else last
        below += grown
        while j < len(weights) and weights[j][0] <= at:
            below += weights[j][1]
            j += 1
            if below >= want:
                return at
        density += change
        last = at
    return last


# -- the plan -------------------------------------------------------------------------


def plan_grid(
    sketch: DurationSketch, target: float, p: PollingConfig, start: float = 0.0
) -> tuple[float, ...]:
    """The class's read grid: the target's, or a relaxed one, and only if it costs no
    more expected reads than the plain backoff on the same durations and sees the end
    no later at the 95th percentile, for a tracking taken in at age ``start`` (the
    class's usual time from the work's creation to our intake) and for one the
    backoff reads from age 0 (no class named at intake). Otherwise empty: the backoff.
    Both costs include ``max_delay_s`` and the backoff past the plan's end."""
    segments = sketch.segments()
    if not segments:
        return ()
    until = edge(max(sketch.bins) + 1)
    backoff = cost(schedule((), p, start, until), sketch)
    for _ in range(_MAX_RELAXATIONS):
        grid = capped(best_grid(segments, target, p.max_delay_s), start, p.max_delay_s)
        if grid and _within(cost(schedule(grid, p, start, until), sketch), backoff):
            # Without a hint the first read is the backoff's, then the plan.
            late = [start + p.initial_delay_s, *schedule(grid, p, start + p.initial_delay_s, until)]
            if _within(cost(late, sketch), backoff):
                return tuple(grid)
        target *= _RELAX
    return ()


def _within(planned: Cost, backoff: Cost) -> bool:
    return planned.reads <= backoff.reads and planned.p95_delay <= backoff.p95_delay
