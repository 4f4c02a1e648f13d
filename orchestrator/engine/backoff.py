"""Backoff with jitter, and the Retry-After header."""

from __future__ import annotations

import random
from email.utils import parsedate_to_datetime


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


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP date).

    Returns None when absent or unreadable; never negative.
    """
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(int(text))
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if seconds == seconds else None  # NaN check
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - now)
