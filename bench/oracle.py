"""The oracle for adaptive polling: the fewest expected reads of any fixed read schedule.

Given the true durations of a class's work (n samples, equally likely) and a mean
delay, which fixed schedule of read ages (the same for every job) sees each job's
end with that mean delay in the fewest expected reads? A read that sees no end could
always move later, to the next duration, losing nothing, so the best schedules read
only at durations. Sorted, with reads at d_j after one at d_i, the jobs i+1..j end
in between and are seen at d_j; every job not yet seen (n - i of them) pays for that
read. Both the reads and the delay add up over these steps, so for a price ``lam`` on
delay a dynamic program over the steps gives the schedule that minimises
``reads + lam * delay``; a search over ``lam`` walks the lower convex hull of the
(mean delay, reads) frontier, and the answer at a given mean delay is read off that
hull between its two neighbouring schedules (a mix of two schedules reaches any point
on the segment between them, so no fixed schedule does better).

``max_gap`` holds the oracle to the rule the service keeps, reads at most
``max_delay_s`` apart (and the first within it): a step longer than that pays for the
reads in between, which see no end.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence


def best_schedule(
    durations: Sequence[float], lam: float, max_gap: float = math.inf
) -> tuple[float, float]:
    """(expected reads, mean delay) of the schedule minimising reads + lam * delay."""
    d = sorted(durations)
    n = len(d)
    if n == 0:
        return 0.0, 0.0
    prefix = [0.0, *itertools.accumulate(d)]
    # f[j]: the least reads + lam * delay (both summed over jobs) with a read at d[j-1]
    # seeing job j last; f[0] = 0 before any read.
    f = [0.0] + [float("inf")] * n
    how: list[tuple[float, float]] = [(0.0, 0.0)] * (n + 1)
    for j in range(1, n + 1):
        at = d[j - 1]
        best, pick = float("inf"), (0.0, 0.0)
        for i in range(j):
            # every job not yet seen reads at d[j-1], and at the reads max_gap adds
            gap = at - (d[i - 1] if i > 0 else 0.0)
            reads = (n - i) * max(1, math.ceil(gap / max_gap - 1e-9))
            delay = at * (j - i) - (prefix[j] - prefix[i])
            value = f[i] + reads + lam * delay
            if value < best:
                best = value
                pick = (how[i][0] + reads, how[i][1] + delay)
        f[j], how[j] = best, pick
    reads, delay = how[n]
    return reads / n, delay / n


# Above this many durations, the order statistics at the middles of equal shares
# stand for them all (not the ends: the longest of 20,000 would stand for a 400th of
# a heavy tail): the program is quadratic in the samples, and a few hundred
# describe a shape closely.
MAX_SAMPLES = 400


def oracle_reads(durations: Sequence[float], mean_delay: float, max_gap: float = math.inf) -> float:
    """The fewest expected reads per job of any fixed schedule (or mix of two) with at
    most ``mean_delay`` between a job's end and the read that sees it."""
    if not durations:
        return 0.0
    if len(durations) > MAX_SAMPLES:
        d = sorted(durations)
        durations = [d[int((k + 0.5) * len(d) / MAX_SAMPLES)] for k in range(MAX_SAMPLES)]
    one = best_schedule(durations, 0.0, max_gap)  # a single read, after the longest
    if mean_delay >= one[1]:
        return one[0]
    exact = best_schedule(durations, 1e9, max_gap)  # a read at every duration
    if mean_delay <= 0:
        return exact[0]
    lo, hi = 0.0, 1.0
    while best_schedule(durations, hi, max_gap)[1] > mean_delay and hi < 1e9:
        hi *= 4
    # lo's schedule is too slow, hi's fast enough: narrow to neighbouring hull points.
    slow, fast = one, best_schedule(durations, hi, max_gap)
    for _ in range(60):
        mid = (lo + hi) / 2
        point = best_schedule(durations, mid, max_gap)
        if point[1] > mean_delay:
            lo, slow = mid, point
        else:
            hi, fast = mid, point
        if hi - lo < 1e-9 * hi:
            break
    if fast[1] >= slow[1]:
        return fast[0]
    share = (slow[1] - mean_delay) / (slow[1] - fast[1])
    return slow[0] + share * (fast[0] - slow[0])
