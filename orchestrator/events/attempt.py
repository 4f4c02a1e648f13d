"""One delivery attempt: its destination, its signature, the send, and what comes of it.

- Signing: Standard Webhooks (https://www.standardwebhooks.com/).
  ``webhook-signature`` is ``v1,`` followed by the base64 HMAC-SHA256, keyed by
  the base64-decoded part of a ``whsec_`` secret, over ``{id}.{timestamp}.{body}``
  where body is the exact bytes sent.
- The retry policy: pure functions of the attempt's result and the time, so that
  every rule of the contract (2xx, 410, 429/502/503/504 with Retry-After, the
  jittered schedule, max age) is tested without a network.
- ``send_attempt``: the stored event in its content mode, signed, traced, sent,
  and the destination's retry policy applied to what came back.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import orjson

from orchestrator import tracing
from orchestrator.clock import Clock, iso, parse_retry_after
from orchestrator.events.cloudevents import CALLBACK, binary_mode
from orchestrator.store.base import Delivery
from orchestrator.tracecontext import TraceContext, parse_traceparent
from orchestrator.transport import Answer, AnswerTooLarge, Transport, TransportError

SECRET_PREFIX = "whsec_"
CONTENT_TYPE = "application/cloudevents+json"  # the structured content mode
JITTER = 0.2
# The receiver is overloaded or behind a failing proxy: the whole sink waits.
THROTTLING = frozenset({429, 502, 503, 504})

Result = Literal["delivered", "retry", "dead"]


def secret_key(secret: str) -> bytes | None:
    """The HMAC key of a ``whsec_`` secret; None for any other value (which
    ``signing_keys`` refuses at start-up: never unsigned by accident).

    Raises ValueError for a ``whsec_`` secret whose key is not base64 or is
    empty: signing with a wrong key would make every receiver reject us.
    """
    if not secret.startswith(SECRET_PREFIX):
        return None
    encoded = secret[len(SECRET_PREFIX) :].strip()
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("whsec_ secret is not valid base64") from None
    if not key:
        raise ValueError("whsec_ secret is empty")
    return key


def signature(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def webhook_headers(key: bytes | None, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The Standard Webhooks headers; ``webhook-signature`` only with a key.

    The id goes out unsigned too: receivers deduplicate redeliveries on it.
    """
    headers = {"webhook-id": msg_id, "webhook-timestamp": str(timestamp)}
    if key is not None:
        headers["webhook-signature"] = signature(key, msg_id, timestamp, body)
    return headers


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
        throttle = status in THROTTLING
        wait = parse_retry_after(retry_after, now) if throttle else None
        if wait is not None:
            error += f" (Retry-After {math.ceil(wait)} s)"
        return self.after_error(error, attempt, event_time, now, wait, status, throttle)

    def after_error(
        self,
        error: str,
        attempt: int,
        event_time: float,
        now: float,
        wait: float | None = None,
        status: int | None = None,
        throttle: bool = False,
    ) -> Decision:
        """A retry at ``wait`` (else by the schedule), or dead past the max age."""
        # Retry-After is a floor set by the receiver: never jittered below it.
        next_at = now + (wait if wait is not None else self.delay(attempt))
        if next_at - event_time > self._max_age_s:
            error = f"{error}; gave up after {attempt} attempts (max age)"
            return Decision("dead", error=error, status=status)
        return Decision("retry", next_at, error, status, throttle)


@dataclass(eq=False)
class Destination:
    """One delivery destination (a sink, or every callback) and what its worker knows of it."""

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
            "signed": self.secret is not None,
            "disabled": self.disabled is not None,
            "disabled_since": iso(since),
            "disabled_reason": why,
            "throttled_until": iso(self.throttled_until) if self.throttled_until > now else None,
            "last_error": self.last_error,
        }


async def send_attempt(
    transport: Transport,
    dest: Destination,
    url: str,
    delivery: Delivery,
    timeout_s: float,
    clock: Clock,
) -> Decision:
    """POST the event once; a CLIENT span of its own when tracing is on and the event
    carries the tracking's trace (the sink gets that span's ``traceparent``)."""
    attempt = delivery.attempts + 1
    # Signed per attempt: the timestamp is fresh, the id and body never change.
    stamp = int(clock.now())
    parent = None if tracing.tracer is None else event_trace(delivery.payload)
    with tracing.client_span("POST", url, parent) as span:  # None: tracing is off
        own = None if span is None else tracing.context_of(span)
        headers, body = outgoing(
            delivery.payload, dest.binary, dest.secret, delivery.event_id, stamp,
            None if own is None else own[0],
        )  # fmt: skip
        try:
            answer = await transport.send("POST", url, headers, body, timeout_s)
        except AnswerTooLarge as exc:  # the sink answered; only its status counts
            answer = Answer(exc.status, b"", exc.retry_after)
        except TimeoutError:
            tracing.answered(span, None, "timeout")
            error = f"timeout after {timeout_s:g} s"
            return dest.policy.after_error(error, attempt, delivery.event_time, clock.now())
        except TransportError as exc:
            tracing.answered(span, None, "connection")
            return dest.policy.after_error(str(exc), attempt, delivery.event_time, clock.now())
        tracing.answered(span, answer.status)
    return dest.policy.after_response(
        answer.status, answer.retry_after, attempt, delivery.event_time, clock.now()
    )


def event_trace(payload: bytes) -> tuple[str, str | None] | None:
    """The tracking's trace context a stored event carries (None: it has none)."""
    if b'"traceparent"' not in payload:
        return None
    event = orjson.loads(payload)
    parent = parse_traceparent(event.get("traceparent"))
    return None if parent is None else (parent, event.get("tracestate"))


def outgoing(
    payload: bytes,
    binary: bool,
    key: bytes | None,
    event_id: str,
    stamp: int,
    attempt: str | None = None,
) -> tuple[dict[str, str], bytes]:
    """One attempt's headers and body: the stored event in its content mode, signed
    (Standard Webhooks) at ``stamp``, with the ``traceparent`` of the attempt's own
    span (``attempt``; else one made here) when the event carries a trace context."""
    if binary:
        headers, body = binary_mode(payload)
    else:
        headers, body = {"Content-Type": CONTENT_TYPE}, payload
    headers.update(webhook_headers(key, event_id, stamp, body))
    if attempt is None and (trace := event_trace(payload)) is not None:
        attempt = TraceContext(trace[0]).child().traceparent
    if attempt is not None:
        headers["traceparent"] = attempt
    return headers, body
