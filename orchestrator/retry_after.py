"""The Retry-After header (RFC 9110 §10.2.3), read the same way everywhere."""

from __future__ import annotations

from email.utils import parsedate_to_datetime


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from ``now``: delta-seconds or an HTTP date.

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
