"""A token bucket: the per-workspace requests-per-second limit."""

from __future__ import annotations


class TokenBucket:
    """``rate`` tokens per second, holding at most ``burst``.

    Time is passed in (monotonic seconds) so the bucket has no clock of its own.
    """

    __slots__ = ("_last", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate = rate
        self.burst = max(1.0, burst)
        self._tokens = self.burst
        self._last = now

    def _refill(self, now: float) -> None:
        if now > self._last:
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now

    def take(self, now: float) -> float:
        """Take one token; return 0.0, or how many seconds to wait before trying again."""
        self._refill(now)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / self.rate
