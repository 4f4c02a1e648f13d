"""Adaptive polling's planner: when to read work of a class whose durations are known. Pure.

From a class's duration histogram (``durations.py``) the planner draws one grid
of read times, in seconds after the work's creation: each read is placed as
late as it can be while the mean delay between the end of the work that ends
since the previous read and this read stays within the detection target. Where
work is unlikely to end (before the class's shortest durations, between two
modes) the grid has no reads at all. A tracking reads at the first grid point
after its current age; past the grid's end it has outlived its class, and the
backoff takes over. The grid never spends more reads than the backoff would
over the same span: where it would, the target is relaxed for that class.

Every other rule (NextRunAt, Retry-After, the deadline, the 404 window, the
rate limit, ``max_delay_s``) still applies on top, in ``decide()``.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from orchestrator.config import PollingConfig
from orchestrator.engine.durations import DurationSketch

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
