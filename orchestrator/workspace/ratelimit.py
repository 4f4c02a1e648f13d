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

    def wait(self, now: float) -> float:
        """Seconds from ``now`` until a token is there (0.0: one is), taking none."""
        tokens = self._tokens
        if now > self._last:
            tokens = min(self.burst, tokens + (now - self._last) * self.rate)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def take(self, now: float) -> float:
        """Take one token; return 0.0, or how many seconds to wait before trying again."""
        tokens = self._tokens
        if now > self._last:
            tokens = min(self.burst, tokens + (now - self._last) * self.rate)
            self._last = now
        if tokens >= 1.0:
            self._tokens = tokens - 1.0
            return 0.0
        self._tokens = tokens
        return (1.0 - tokens) / self.rate
