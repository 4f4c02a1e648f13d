"""Adaptive polling's promise: never more reads than the backoff, nor a later view.

On virtual time, the real engine twice on the same jobs (``bench/adaptive_battery.py``
tracks them, adaptive on and off); and the planner on many generated shapes and
polling configurations, its plan's expected reads and delay p95 held to the backoff's
on the same durations.
"""

from __future__ import annotations

import random

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from bench.adaptive_battery import run_wide_lazy
from orchestrator.config import load_settings
from orchestrator.engine.adaptive import DurationSketch, edge
from orchestrator.engine.plan import backoff_ages, backoff_count, cost, plan_grid, schedule


def test_the_issue_48_shape_reads_no_more_than_the_backoff() -> None:
    """max_delay_s 5, one FunctionKey, 2-40 s evenly, Queued for 10-60% of it, the
    lifecycle starting at the first read, no CreatedAt: the backoff read 8.7 times per
    terminal, adaptive 14.8 before its grid stopped reading each slot twice."""
    figures = run_wide_lazy(600, gap_s=0.05)
    assert figures["adaptive_reads"] <= figures["backoff_reads"]
    assert figures["adaptive_delay_p95_s"] <= figures["backoff_delay_p95_s"] * 1.05


modes = st.lists(
    st.tuples(
        st.floats(0.2, 600.0),  # centre, s
        st.floats(0.0, 1.0),  # spread, as a share of the centre
        st.floats(0.1, 1.0),  # weight
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=60, deadline=None)
@given(
    modes=modes,
    initial=st.floats(0.2, 5.0),
    ratio=st.floats(1.0, 60.0),
    multiplier=st.floats(1.0, 3.0),
    target=st.floats(0.2, 10.0),
    start=st.floats(0.0, 3.0),
    seed=st.integers(0, 1000),
)
def test_a_plan_never_costs_more_than_the_backoff(
    modes: list[tuple[float, float, float]],
    initial: float,
    ratio: float,
    multiplier: float,
    target: float,
    start: float,
    seed: int,
) -> None:
    rng = random.Random(seed)
    sketch = DurationSketch()
    weights = [w for _, _, w in modes]
    for _ in range(200):
        [(centre, spread, _)] = rng.choices(modes, weights)
        sketch.add(max(0.0, centre * (1 + spread * rng.uniform(-1, 1))), 50)
    polling = {"initial_delay_s": initial, "max_delay_s": initial * ratio, "multiplier": multiplier}
    p = load_settings(None, polling=polling).polling
    grid = plan_grid(sketch, target, p, start)
    until = edge(max(sketch.bins) + 1)
    backoff = cost(schedule((), p, start, until), sketch)
    planned = cost(schedule(grid, p, start, until), sketch)
    assert planned.reads <= backoff.reads + 1e-9
    assert planned.p95_delay <= backoff.p95_delay + 1e-9
    # No two planned reads closer than they need be: the grid's gaps are within max_delay_s.
    gaps = [b - a for a, b in zip((start, *grid), grid, strict=False)]
    assert all(g <= p.max_delay_s + 1e-6 for g in gaps)


@settings(max_examples=200, deadline=None)
@given(
    age=st.floats(0.0, 1000.0),
    initial=st.floats(0.2, 5.0),
    ratio=st.floats(1.0, 60.0),
    multiplier=st.floats(1.0, 3.0),
)
def test_the_backoff_s_count_at_an_age_is_its_schedule_s(
    age: float, initial: float, ratio: float, multiplier: float
) -> None:
    polling = {"initial_delay_s": initial, "max_delay_s": initial * ratio, "multiplier": multiplier}
    p = load_settings(None, polling=polling).polling
    ages = backoff_ages(0.0, p, age)
    assume(all(abs(a - age) > 1e-6 for a in ages))  # not on a read: float sums differ
    assert backoff_count(age, p) == sum(1 for a in ages if a <= age)
