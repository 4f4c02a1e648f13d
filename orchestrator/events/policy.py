"""What happens after one delivery attempt: delivered, retry when, or dead.

Pure functions of the attempt's result and the time, so that every rule of the
contract (2xx, 410, 429/502/503/504 with Retry-After, the jittered schedule, max age)
is tested without a network.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from orchestrator.retry_after import parse_retry_after

__all__ = ["JITTER", "Decision", "RetryPolicy", "parse_retry_after"]

JITTER = 0.2
# The receiver is overloaded or behind a failing proxy: the whole sink waits.
THROTTLING = frozenset({429, 502, 503, 504})

Result = Literal["delivered", "retry", "dead"]


@dataclass(frozen=True, slots=True)
class Decision:
    result: Result
    next_attempt_at: float | None = None
    error: str | None = None
    status: int | None = None  # the HTTP status of the attempt, when there was one
    # Nothing more goes to this sink before next_attempt_at (429, 502, 503, 504).
    throttle: bool = False
    # 410 Gone: the receiver asks for nothing more (a sink is disabled).
    gone: bool = False


class RetryPolicy:
    def __init__(
        self,
        schedule_s: Sequence[float],
        max_age_s: float,
        rng: random.Random | None = None,
    ) -> None:
        if not schedule_s:
            raise ValueError("retry schedule must not be empty")
        self._schedule = list(schedule_s)
        self._max_age_s = max_age_s
        self._rng = rng or random.Random()

    def delay(self, attempt: int) -> float:
        """Delay after the ``attempt``-th failed attempt (1-based), jittered ±20 %."""
        base = self._schedule[min(max(attempt, 1), len(self._schedule)) - 1]
        return base * self._rng.uniform(1 - JITTER, 1 + JITTER)

    def after_response(
        self,
        status: int,
        retry_after: str | None,
        attempt: int,
        event_time: float,
        now: float,
    ) -> Decision:
        if 200 <= status < 300:
            return Decision("delivered", status=status)
        if status == 410:
            error = "HTTP 410: the receiver asked us to stop"
            return Decision("dead", error=error, status=410, gone=True)
        error = f"HTTP {status}"
        if 300 <= status < 400:
            error += " (redirects are not followed)"
        wait = None
        if status in THROTTLING:
            wait = parse_retry_after(retry_after, now)
            if wait is not None:
                error += f" (Retry-After {math.ceil(wait)} s)"
        decision = self._retry(error, attempt, event_time, now, wait, status)
        if status in THROTTLING and decision.result == "retry":
            return Decision("retry", decision.next_attempt_at, error, status, throttle=True)
        return decision

    def after_error(self, error: str, attempt: int, event_time: float, now: float) -> Decision:
        return self._retry(error, attempt, event_time, now, None, None)

    def _retry(
        self,
        error: str,
        attempt: int,
        event_time: float,
        now: float,
        wait: float | None,
        status: int | None,
    ) -> Decision:
        # Retry-After is a floor set by the receiver: never jittered below it.
        next_at = now + (wait if wait is not None else self.delay(attempt))
        if next_at - event_time > self._max_age_s:
            error = f"{error}; gave up after {attempt} attempts (max age)"
            return Decision("dead", error=error, status=status)
        return Decision("retry", next_attempt_at=next_at, error=error, status=status)
