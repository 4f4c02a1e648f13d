"""One workspace's gate: every request the service makes to it passes here.

A request holds one of ``max_in_flight`` slots (an anyio ``CapacityLimiter``),
then takes a token of the ``max_requests_per_second`` bucket, and waits out any
``Retry-After`` the workspace has given; only then does it go out. Nothing else
keeps rate state: the scheduler only asks the gate how long until a request
could start, so that it does not take work it cannot send yet.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable

import anyio

LEASE_RECHECK_S = 0.05


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


class WorkspaceGate:
    def __init__(
        self,
        rate: float,
        max_in_flight: int,
        monotonic: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._mono = monotonic
        self._sleep = sleep
        # A bucket lets through its burst plus a second's refill in any one
        # second: refilling at the limit less the burst keeps every one-second
        # window within the limit, while a small burst (a fiftieth of a second's
        # worth) spares a timer per request.
        self.rate = rate
        self.burst = max(1.0, rate / 50)
        self._bucket = TokenBucket(rate - (self.burst - 1.0), burst=self.burst, now=monotonic())
        self._slots = anyio.CapacityLimiter(max_in_flight)
        self.max_in_flight = max_in_flight
        self._slots_total = max_in_flight  # this replica's share of max_in_flight
        # While the workspace answers nothing (reads time out or cannot connect), one
        # read at a time probes it: reads piled up unanswered would reach it all at
        # once when the link heals, above the limit they were sent within.
        self.probing = False
        self.blocked_until = 0.0
        # Replicas sharing a store: nothing goes out once this replica can no longer be
        # sure it still holds its leases (monotonic time; inf for a single process).
        self.leases_valid_until = math.inf
        self.lease_epoch = 0  # moves when the leases are given up: waiting reads are void
        self.share = 1

    def set_share(self, replicas: int) -> None:
        """Hold this replica to 1/replicas of the workspace's limits, so that replicas
        together stay within them."""
        replicas = max(1, replicas)
        if replicas == self.share:
            return
        self.share = replicas
        rate = self.rate / replicas
        self.burst = max(1.0, rate / 50)
        self._bucket.rate = rate - (self.burst - 1.0)
        self._bucket.burst = self.burst
        self._slots_total = max(1, self.max_in_flight // replicas)
        self._slots.total_tokens = 1 if self.probing else self._slots_total

    def unanswered(self) -> None:
        """A request got no answer at all: one in flight at a time from now."""
        if not self.probing:
            self.probing = True
            self._slots.total_tokens = 1

    def answered(self) -> None:
        """The workspace answered (any status): the whole share of slots again."""
        if self.probing:
            self.probing = False
            self._slots.total_tokens = self._slots_total

    def hold_leases_until(self, until: float) -> None:
        """A renewal landed: requests may go out until monotonic ``until``."""
        self.leases_valid_until = until

    def give_leases_up(self) -> None:
        """Nothing more goes out, and requests waiting for a slot are not sent."""
        self.leases_valid_until = -math.inf
        self.lease_epoch += 1

    def block(self, seconds: float) -> None:
        """The workspace said Retry-After: nothing goes out for ``seconds``."""
        until = self._mono() + seconds
        if until > self.blocked_until:
            self.blocked_until = until

    def blocked_for(self) -> float:
        """Seconds left of a Retry-After, or 0."""
        return max(0.0, self.blocked_until - self._mono())

    def wait_s(self, now: float) -> float:
        """How long from ``now`` until a request could start (0: now)."""
        if now >= self.leases_valid_until:
            return LEASE_RECHECK_S
        return max(self.blocked_until - now, self._bucket.wait(now))

    def in_flight(self) -> float:
        return float(self._slots.borrowed_tokens)

    def enter_nowait(self, holder: object) -> bool:
        """Let ``holder``'s request out now if a slot and a token are free and no
        Retry-After holds; False (nothing taken) otherwise."""
        now = self._mono()
        if self.blocked_until > now or now >= self.leases_valid_until:
            return False
        try:
            self._slots.acquire_on_behalf_of_nowait(holder)
        except anyio.WouldBlock:
            return False
        if self._bucket.take(now) > 0:
            self._slots.release_on_behalf_of(holder)
            return False
        return True

    async def enter(self, holder: object) -> None:
        """Wait until ``holder``'s request may go out: a slot, then a token."""
        await self._slots.acquire_on_behalf_of(holder)
        try:
            # The slot first, then the token: the request starts as its token
            # is taken, so no wait for a slot can bunch requests into a window.
            while True:
                now = self._mono()
                if self.blocked_until > now:
                    await self._sleep(self.blocked_until - now)
                    continue
                if now >= self.leases_valid_until:
                    await self._sleep(LEASE_RECHECK_S)
                    continue
                wait = self._bucket.take(now)
                if wait <= 0:
                    return
                await self._sleep(wait)
        except BaseException:
            self._slots.release_on_behalf_of(holder)
            raise

    def leave(self, holder: object) -> None:
        """``holder``'s request is over (answered or not): its slot is free."""
        self._slots.release_on_behalf_of(holder)
