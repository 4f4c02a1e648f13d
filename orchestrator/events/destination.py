"""One delivery destination (a sink, or every callback) and what its worker knows of it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from orchestrator.clock import iso
from orchestrator.events.cloudevents import CALLBACK
from orchestrator.events.policy import Decision, RetryPolicy


@dataclass(eq=False)
class Destination:
    key: str  # "sink:<name>" or "callback", as stored
    label: str  # the metric label: the sink's name or "callback", never a URL or id
    url: str | None  # None for callbacks (per delivery) and for sinks no longer configured
    max_in_flight: int
    policy: RetryPolicy
    secret: bytes | None
    binary: bool = False  # the CloudEvents binary content mode (a sink's mode)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    due: list[float] = field(default_factory=list)  # heap of retry times we scheduled
    # A sink that answered 429/502/503/504 gets nothing before this (wall time).
    throttled_until: float = 0.0
    # (since, why) while the sink is disabled; it gets nothing until enabled.
    disabled: tuple[float, str] | None = None
    failing_since: float | None = None  # the first failure since the last success
    saved: bool = True  # False while a disabled state is not in the store yet
    last_error: str | None = None  # the latest failed attempt's, since this process started

    @property
    def is_sink(self) -> bool:
        return self.key != CALLBACK

    def health(self, decision: Decision, now: float, disable_after_s: float) -> str | None:
        """Note an attempt's result; why to disable the sink now, or None."""
        if decision.result == "delivered":
            self.failing_since = None
            return None
        self.last_error = decision.error
        if self.failing_since is None:
            self.failing_since = now
        if disable_after_s > 0 and now - self.failing_since >= disable_after_s:
            return f"no successful delivery for {disable_after_s:g} s; last: {decision.error}"
        return None

    def disable(self, now: float, why: str) -> bool:
        """False when it already was."""
        if self.disabled is not None:
            return False
        self.disabled = (now, why)
        return True

    def enable(self) -> bool:
        """True when it was disabled."""
        was = self.disabled is not None
        self.disabled, self.failing_since, self.throttled_until = None, None, 0.0
        self.wake.set()
        return was

    def state(self, now: float) -> dict[str, object]:
        since, why = self.disabled if self.disabled is not None else (None, None)
        return {
            "name": self.label,
            "disabled": self.disabled is not None,
            "disabled_since": iso(since),
            "disabled_reason": why,
            "throttled_until": iso(self.throttled_until) if self.throttled_until > now else None,
            "last_error": self.last_error,
        }
