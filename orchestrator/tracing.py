"""OpenTelemetry spans, configured by OpenTelemetry's own environment variables.

Off unless an OTLP endpoint or a traces exporter is named
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``,
``OTEL_TRACES_EXPORTER``); ``OTEL_SDK_DISABLED=true`` turns it off. Off, every
helper here is a check of one module global: nothing is imported from the SDK
and a poll costs nothing more. On, the SDK reads the rest of its variables
itself (``OTEL_SERVICE_NAME``, ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``, ...)
and spans go out over OTLP/HTTP.

The spans, all in the trace of the tracking's stored context (the caller's,
or this service's intake span when it has one):
- a SERVER span per intake request, child of the caller's ``traceparent``;
- a CLIENT span per workspace request made while polling a traced tracking;
- an INTERNAL span for the terminal transition;
- a CLIENT span per delivery attempt, whose ``traceparent`` the sink receives.
A wait of hours is many short spans under one parent, never one long span.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

log = logging.getLogger("orchestrator.tracing")

# (traceparent, tracestate) of the tracking being polled, for the client spans of
# the requests its poll makes; set only while tracing is on.
POLL_TRACE: ContextVar[tuple[str, str | None] | None] = ContextVar("poll_trace", default=None)

_provider: TracerProvider | None = None
tracer: Tracer | None = None  # None: tracing is off


def wanted(env: Mapping[str, str] = os.environ) -> bool:
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    return bool(
        exporter
        or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def start() -> bool:
    """Turn tracing on if the environment asks for it; True when on."""
    global _provider, tracer
    if not wanted():
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; the
    # provider reads OTEL_TRACES_SAMPLER(_ARG); the exporter its OTLP variables.
    resource = Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME") or "moltaro-orchestrator"}
    )
    _provider = TracerProvider(resource=resource)
    _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    tracer = _provider.get_tracer("orchestrator")
    log.info("OpenTelemetry tracing on", extra={"fields": {"exporter": "otlp/http"}})
    return True


def stop() -> None:
    """Export what is buffered and turn tracing off (at shutdown)."""
    global _provider, tracer
    if _provider is not None:
        _provider.shutdown()
    _provider = tracer = None


def _parent(traceparent: str | None, tracestate: str | None) -> Any:
    """An OpenTelemetry context whose parent is the given W3C context (None: a root)."""
    if traceparent is None:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {"traceparent": traceparent}
    if tracestate:
        carrier["tracestate"] = tracestate
    return TraceContextTextMapPropagator().extract(carrier)


def context_of(span: Span) -> tuple[str, str | None] | None:
    """The span's own W3C context (traceparent, tracestate); None if it has none."""
    from opentelemetry.trace import set_span_in_context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, context=set_span_in_context(span))
    if "traceparent" not in carrier:
        return None
    return carrier["traceparent"], carrier.get("tracestate")


def _url_attributes(url: str) -> dict[str, Any]:
    """``url.full`` without credentials or query (a sink URL may carry a token)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return {
        "url.full": f"{parts.scheme}://{host}:{port}{parts.path}",
        "server.address": host,
        "server.port": port,
    }


def server_span(
    method: str, route: str, traceparent: str | None, tracestate: str | None
) -> contextlib.AbstractContextManager[Span | None]:
    """The intake request's SERVER span, child of the caller's context."""
    if tracer is None:
        return contextlib.nullcontext()
    from opentelemetry.trace import SpanKind

    return tracer.start_as_current_span(
        f"{method} {route}",
        context=_parent(traceparent, tracestate),
        kind=SpanKind.SERVER,
        attributes={"http.request.method": method, "http.route": route, "url.path": route},
    )


def client_span(
    method: str, url: str, parent: tuple[str, str | None] | None
) -> contextlib.AbstractContextManager[Span | None]:
    """A CLIENT span for one outgoing request, child of ``parent`` (a W3C context);
    named by its method, as the HTTP conventions name a client span without a template."""
    if tracer is None or parent is None:
        return contextlib.nullcontext()
    from opentelemetry.trace import SpanKind

    return tracer.start_as_current_span(
        method,
        context=_parent(*parent),
        kind=SpanKind.CLIENT,
        attributes={"http.request.method": method, **_url_attributes(url)},
    )


def answered(span: Span | None, status: int | None, error: str | None = None) -> None:
    """Record an outgoing request's answer (``status``) or its trouble (``error``)."""
    if span is None:
        return
    if status is not None:
        span.set_attribute("http.response.status_code", status)
    if error is not None or (status is not None and status >= 500):
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", error or str(status))
        span.set_status(Status(StatusCode.ERROR))


def terminal_span(
    trace: tuple[str, str | None] | None, attributes: Mapping[str, Any]
) -> contextlib.AbstractContextManager[object]:
    """The terminal transition's INTERNAL span, in the tracking's trace."""
    if tracer is None or trace is None:
        return contextlib.nullcontext()
    return tracer.start_as_current_span(
        "tracking terminal", context=_parent(*trace), attributes=dict(attributes)
    )
