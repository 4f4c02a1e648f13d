"""Backoff with jitter."""

from __future__ import annotations

import random


def next_delay(current: float | None, initial: float, multiplier: float, maximum: float) -> float:
    """The next delay before jitter: starts at ``initial`` and grows to ``maximum``.

    ``current`` is None after the remote status changed, which restarts the
    progression: a job that just moved is likely to move again soon.
    """
    if current is None:
        return initial
    return min(current * multiplier, maximum)


def jittered(delay: float, jitter: float, rng: random.Random) -> float:
    """Spread by ±jitter so that trackings created together do not poll together."""
    if jitter <= 0:
        return delay
    return delay * rng.uniform(1.0 - jitter, 1.0 + jitter)
