"""The oracle's dynamic program against small cases solved by hand."""

from __future__ import annotations

import random

import pytest

from bench.oracle import best_schedule, oracle_reads


def test_two_durations() -> None:
    # Read at 1 and 2: every job reads once, the one still running twice: 1.5, no delay.
    assert oracle_reads([1.0, 2.0], 0.0) == pytest.approx(1.5)
    # One read at 2: the first job waits 1 s, the second none: mean delay 0.5.
    assert oracle_reads([1.0, 2.0], 0.5) == pytest.approx(1.0)
    # Between the two schedules, half of each.
    assert oracle_reads([1.0, 2.0], 0.25) == pytest.approx(1.25)
    assert oracle_reads([1.0, 2.0], 5.0) == pytest.approx(1.0)


def test_three_durations() -> None:
    d = [1.0, 2.0, 3.0]
    assert oracle_reads(d, 0.0) == pytest.approx(2.0)  # reads at 1, 2, 3: 1 + 2/3 + 1/3
    # Reads at 2 and 3: 1 + 1/3 reads, delay (1 + 0 + 0) / 3; reads at 1 and 3 cost more
    # (1 + 2/3) for the same delay, so the frontier passes through (1/3, 4/3).
    assert oracle_reads(d, 1 / 3) == pytest.approx(4 / 3)
    # Halfway from (1/3, 4/3) to a single read at 3: (1, 1).
    assert oracle_reads(d, 2 / 3) == pytest.approx(7 / 6)
    assert best_schedule(d, 0.0) == pytest.approx((1.0, 1.0))


def test_a_fixed_duration_needs_one_read() -> None:
    assert oracle_reads([5.0] * 20, 0.0) == pytest.approx(1.0)


def test_no_fixed_schedule_beats_it() -> None:
    """Every schedule of reads at the durations, tried one by one, lies on or above it."""
    rng = random.Random(3)
    d = sorted(rng.uniform(1, 10) for _ in range(7))
    for mask in range(1, 2 ** len(d)):
        reads_at = [x for k, x in enumerate(d) if mask >> k & 1]
        if reads_at[-1] != d[-1]:
            continue
        reads = delay = 0.0
        for x in d:
            seen = next(k for k, r in enumerate(reads_at) if r >= x)
            reads += seen + 1
            delay += reads_at[seen] - x
        reads, delay = reads / len(d), delay / len(d)
        assert oracle_reads(d, delay) <= reads + 1e-9


def test_reads_at_most_max_gap_apart() -> None:
    # One job of 8 s, reads at most 5 s apart: a read before 5 s sees nothing, then 8.
    assert oracle_reads([8.0], 0.0, max_gap=5.0) == pytest.approx(2.0)
    # 2 and 12 s, 5 s apart at most: 2, then two steps to 12 (7 and 12) for the other.
    assert oracle_reads([2.0, 12.0], 0.0, max_gap=5.0) == pytest.approx(1 + 2 / 2)


def test_a_rare_extreme_duration_weighs_its_share_when_thinned() -> None:
    # One job in 20,000 runs for 1000 s (read every 5 s); thinned to the program's few
    # hundred durations it must not stand for a 400th of them (1.5 reads, not 1.01).
    durations = [1.0] * 19_999 + [1000.0]
    assert oracle_reads(durations, 0.0, max_gap=5.0) == pytest.approx(1.0, abs=0.02)
