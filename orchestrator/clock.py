"""Time, passed in so that the engine can run against a fake clock in tests, and time
as the wire writes it (RFC 3339 bodies, the Retry-After header)."""

from __future__ import annotations

import functools
import time
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Wall-clock unix seconds (persisted, compared with server timestamps)."""

    def monotonic(self) -> float:
        """Monotonic seconds (durations, timers)."""


class SystemClock:
    # The C functions themselves, not methods wrapping them: the poll path reads
    # the clock several times per read and a Python frame per call shows up.
    now = staticmethod(time.time)
    monotonic = staticmethod(time.monotonic)


# Cached: a batch's answers repeat the same few instants (created, first poll)
# a thousand times, and formatting one costs more than the rest of its field.
@functools.lru_cache(maxsize=4096)
def iso(ts: float | None) -> str | None:
    """RFC 3339 UTC with milliseconds and a Z, the form every body of ours uses."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(value: str) -> float:
    """Unix seconds from an ISO 8601 timestamp; naive times are taken as UTC."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from ``now`` by a Retry-After header (RFC 9110 §10.2.3), read
    the same way everywhere: delta-seconds or an HTTP date.

    None when absent or unreadable, so that the caller's own schedule applies;
    never negative.
    """
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)
