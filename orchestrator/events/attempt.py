"""One delivery attempt: the stored event in its content mode, signed, traced, sent,
and the destination's retry policy applied to what came back."""

from __future__ import annotations

import orjson

from orchestrator import tracing
from orchestrator.clock import Clock
from orchestrator.events.cloudevents import binary_mode
from orchestrator.events.destination import Destination
from orchestrator.events.policy import Decision
from orchestrator.events.signing import webhook_headers
from orchestrator.store.base import Delivery
from orchestrator.tracecontext import TraceContext, parse_traceparent
from orchestrator.transport import Answer, AnswerTooLarge, Transport, TransportError

CONTENT_TYPE = "application/cloudevents+json"  # the structured content mode


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
