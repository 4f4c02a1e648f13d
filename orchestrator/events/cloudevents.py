"""Building the CloudEvents 1.0 events we emit (structured JSON mode).

An event is serialized exactly once, here: the bytes go into the outbox and
every delivery attempt, feed page and SSE message carries them unchanged, so a
receiver sees one id and one body however often it is redelivered.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import orjson

from orchestrator.clock import iso
from orchestrator.config import EventsConfig
from orchestrator.group_resource import group_event_data
from orchestrator.resource import tracking_resource
from orchestrator.store.base import NewEvent, Tracking
from orchestrator.store.groups import GroupEnd

TYPE_PREFIX = "com.moltaro.orchestrator.tracking."
STATUS_CHANGED = TYPE_PREFIX + "status_changed"
# One finished occurrence of a tracked schedule (not terminal: a schedule has many).
OCCURRENCE = TYPE_PREFIX + "occurrence"
CALLBACK = "callback"
# Operational events: about a sink, not a tracking (contract section 4).
SINK_DISABLED = "com.moltaro.orchestrator.sink.disabled"
SINK_ENABLED = "com.moltaro.orchestrator.sink.enabled"
SINK_SOURCE = "urn:moltaro-orchestrator:sinks"
# A group's one event, when its members have all ended or its deadline came first.
GROUP_PREFIX = "com.moltaro.orchestrator.group."
GROUP_SOURCE = "urn:moltaro-orchestrator:groups"


def sink_destination(name: str) -> str:
    return f"sink:{name}"


class EventFactory:
    """Turns a tracking, as it is at the moment of the event, into a NewEvent."""

    def __init__(self, events: EventsConfig) -> None:
        self._sinks = [sink_destination(s.name) for s in events.sinks]
        # Told of each group end whose event is made (the engine's metrics).
        self.group_observer: Callable[[GroupEnd], None] | None = None

    def terminal(self, tracking: Tracking, now: float) -> NewEvent:
        """The one terminal event; ``tracking`` must already carry its outcome."""
        if tracking.outcome is None:
            raise ValueError(f"tracking {tracking.tracking_id} has no outcome")
        return self._build(tracking, TYPE_PREFIX + tracking.outcome, now)

    def status_changed(self, tracking: Tracking, now: float) -> NewEvent:
        return self._build(tracking, STATUS_CHANGED, now)

    def occurrence(self, tracking: Tracking, occurrence: dict[str, Any], now: float) -> NewEvent:
        """``data`` is the tracking resource plus ``occurrence``."""
        return self._build(tracking, OCCURRENCE, now, {"occurrence": occurrence})

    def sink_event(self, type_: str, name: str, state: dict[str, Any], now: float) -> NewEvent:
        """``sink.disabled`` or ``sink.enabled`` of sink ``name``, whose ``state`` is
        the data; for every other sink, never a callback."""
        about = sink_destination(name)
        event_id, payload = _envelope(SINK_SOURCE, type_, name, now, state)
        others = [d for d in self._sinks if d != about]
        return NewEvent(event_id, None, type_, now, payload, others, sink=about)

    def group(self, end: GroupEnd) -> NewEvent:
        """``group.completed`` or ``group.deadline_exceeded``, to every sink (never a
        callback: members may have several), with the sealing call's trace context."""
        g = end.group
        if self.group_observer is not None:
            self.group_observer(end)
        now = g.ended_at if g.ended_at is not None else g.created_at
        trace = None
        if g.traceparent is not None:
            trace = {"traceparent": g.traceparent}
            if g.tracestate:
                trace["tracestate"] = g.tracestate
        type_ = GROUP_PREFIX + (g.outcome or "completed")
        event_id, payload = _envelope(
            GROUP_SOURCE, type_, g.name, now, group_event_data(end), trace
        )
        # ``sink`` is what an event of no tracking is about: here the group.
        return NewEvent(
            event_id, None, type_, now, payload, list(self._sinks), sink=f"group:{g.name}"
        )

    def _build(
        self, tracking: Tracking, type_: str, now: float, extra: dict[str, Any] | None = None
    ) -> NewEvent:
        data = tracking_resource(tracking)
        if extra:
            data.update(extra)
        source = f"urn:moltaro-orchestrator:{tracking.workspace}"
        trace = None
        if tracking.traceparent is not None:
            trace = {"traceparent": tracking.traceparent}
            if tracking.tracestate:
                trace["tracestate"] = tracking.tracestate
        event_id, payload = _envelope(source, type_, tracking.tracking_id, now, data, trace)
        url = tracking.callback_url
        destinations = [*self._sinks, CALLBACK] if url else list(self._sinks)
        return NewEvent(event_id, tracking.tracking_id, type_, now, payload, destinations, url)


def _envelope(
    source: str,
    type_: str,
    subject: str,
    now: float,
    data: dict[str, Any],
    trace: dict[str, str] | None = None,
) -> tuple[str, bytes]:
    """A new event id and the CloudEvent, serialized once; ``trace``: the Distributed
    Tracing extension's attributes (``traceparent``, ``tracestate``), if any."""
    event_id = str(uuid.uuid4())
    body: dict[str, Any] = {
        "specversion": "1.0",
        "id": event_id,
        "source": source,
        "type": type_,
        "subject": subject,
        "time": iso(now),
        "datacontenttype": "application/json",
        **(trace or {}),
        "data": data,
    }
    return event_id, orjson.dumps(body)


# Printable ASCII but space, '"' and '%' go as they are; the rest is percent-encoded
# (the CloudEvents HTTP binding's rule for header values).
_HEADER_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in '"%')


def binary_mode(structured: bytes) -> tuple[dict[str, str], bytes]:
    """A stored structured event as the binary content mode: (headers, body).

    Every attribute but ``data`` becomes a ``ce-`` header and ``data`` is the
    body, in its ``datacontenttype``; the body is what the signature covers.
    """
    event = orjson.loads(structured)
    data = event.pop("data", None)
    content_type = event.pop("datacontenttype", "application/json")
    headers = {"Content-Type": content_type}
    for name, value in event.items():
        text = value if isinstance(value, str) else orjson.dumps(value).decode()
        headers[f"ce-{name}"] = quote(text, safe=_HEADER_SAFE)
    return headers, orjson.dumps(data)
