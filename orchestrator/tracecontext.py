"""W3C Trace Context: the ``traceparent`` and ``tracestate`` a caller sends, checked.

A value that does not follow the specification is ignored, never refused (the
spec: a vendor that cannot parse ``traceparent`` starts a new trace, and drops
``tracestate`` with it). What is kept is stored with the tracking and carried
to its events, whatever happens to the process in between.
"""

from __future__ import annotations

import re
import secrets
from itertools import accumulate
from typing import NamedTuple

# version "-" trace-id "-" parent-id "-" trace-flags; a later version may add fields.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_KEY = re.compile(
    r"(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})"
)
_VALUE = re.compile(r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]")
MAX_TRACESTATE_MEMBERS = 32
MAX_TRACESTATE_LEN = 512  # what we keep and pass on: the spec's minimum to propagate


class TraceContext(NamedTuple):
    """A valid ``traceparent`` (normalised to version 00) and its ``tracestate``."""

    traceparent: str
    tracestate: str | None = None

    @property
    def trace_id(self) -> str:
        return self.traceparent[3:35]

    def child(self) -> TraceContext:
        """The context of a new span under this one: same trace, a new span id."""
        span_id = secrets.token_hex(8)
        while span_id == "0" * 16:
            span_id = secrets.token_hex(8)
        return TraceContext(
            f"00-{self.trace_id}-{span_id}-{self.traceparent[53:55]}", self.tracestate
        )


def parse_traceparent(value: str | None) -> str | None:
    """``value`` as a version-00 ``traceparent``, or None when it does not follow the spec."""
    if value is None:
        return None
    m = _TRACEPARENT.fullmatch(value.strip())
    if m is None:
        return None
    version, trace_id, parent_id, flags, rest = m.groups()
    if version == "ff" or trace_id == "0" * 32 or parent_id == "0" * 16:
        return None
    if version == "00" and rest is not None:
        return None  # version 00 has exactly four fields
    # A later version is read as 00 (its first four fields), as the spec asks.
    return f"00-{trace_id}-{parent_id}-{flags}"


def parse_tracestate(value: str | None) -> str | None:
    """``value`` if it is a valid ``tracestate`` (list members ``key=value``, at most 32,
    no key twice), shortened to whole members within 512 characters; else None."""
    if value is None:
        return None
    members: list[str] = []
    keys: set[str] = set()
    for raw in value.split(","):
        member = raw.strip(" \t")
        if not member:
            continue  # empty list members are allowed and dropped
        key, sep, val = member.partition("=")
        if not sep or key in keys or not (_KEY.fullmatch(key) and _VALUE.fullmatch(val)):
            return None
        keys.add(key)
        members.append(member)
    if not members or len(members) > MAX_TRACESTATE_MEMBERS:
        return None
    # Each member's length with the comma before it: the whole list's, one short.
    ends = accumulate(len(member) + 1 for member in members)
    kept = [m for m, end in zip(members, ends, strict=True) if end - 1 <= MAX_TRACESTATE_LEN]
    return ",".join(kept) or None


class Received(NamedTuple):
    """What a request carried: the context kept (None: no valid ``traceparent``), and
    which of the two headers were present but malformed."""

    context: TraceContext | None
    malformed: tuple[str, ...]


def received(traceparent: str | None, tracestate: str | None) -> Received:
    malformed: list[str] = []
    parent = parse_traceparent(traceparent)
    if traceparent is not None and parent is None:
        malformed.append("traceparent")
    state = parse_tracestate(tracestate)
    if tracestate is not None and state is None and tracestate.strip():
        malformed.append("tracestate")
    if parent is None:
        return Received(None, tuple(malformed))  # tracestate is dropped with its parent
    return Received(TraceContext(parent, state), tuple(malformed))
