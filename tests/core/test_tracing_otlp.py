"""OpenTelemetry spans through a real OTLP/HTTP receiver of the test's own.

One trace joins the caller's span, the intake's SERVER span, the CLIENT span of
each status read, the terminal transition's span and the delivery attempt's
CLIENT span; the sink's request carries that attempt's ``traceparent``, and the
CloudEvent (parsed with the CloudEvents SDK) carries the trace as its
Distributed Tracing extension attributes. Tracing is configured by
OpenTelemetry's own environment variables only.
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from cloudevents.core.bindings.http import HTTPMessage, from_http_event
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from standardwebhooks import Webhook

from orchestrator.simulator import start_simulator
from tests.core.test_restart import write_config
from tests.core.test_trace_context import Sink
from tests.serveproc import ServeProcess, free_port

SECRET = "whsec_" + base64.b64encode(b"otlp-sink-secret-32-bytes-long!!").decode()
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"


class Receiver:
    """An OTLP/HTTP traces endpoint: every span exported, decoded from protobuf."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def traces(self, request: web.Request) -> web.Response:
        assert request.content_type == "application/x-protobuf"
        export = ExportTraceServiceRequest.FromString(await request.read())
        for resource in export.resource_spans:
            for scope in resource.scope_spans:
                self.spans.extend(scope.spans)
        answer = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=answer, content_type="application/x-protobuf")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/traces", self.traces)
        self.runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def close(self) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


def _attrs(span: Span) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        value = kv.value
        out[kv.key] = value.string_value or value.int_value
    return out


async def test_one_trace_joins_the_caller_intake_polls_terminal_and_delivery(
    tmp_path: Path,
) -> None:
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=5)
    sink, receiver = Sink(), Receiver()
    await sink.start()
    await receiver.start()
    port = free_port()
    cfg = write_config(tmp_path, sim.url, port)
    cfg.write_text(
        cfg.read_text()
        + f"""
[[events.sinks]]
name = "default"
url = "http://127.0.0.1:{sink.port}/default"
secret_env = "OTLP_SINK_SECRET"
"""
    )
    env = {
        "OTLP_SINK_SECRET": SECRET,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
        "OTEL_SERVICE_NAME": "orchestrator-under-test",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    serve = ServeProcess(cfg, port, tmp_path / "serve.log", env=env)
    try:
        async with aiohttp.ClientSession() as session:
            await serve.start(session)
            steps = [{"after_s": 0, "status": "Queued"}, {"after_s": 1, "status": "Completed"}]
            async with session.post(
                f"{sim.url}/_sim/script", json={"kind": "function_job", "steps": steps}
            ) as resp:
                rid = (await resp.json())["id"]
            caller = f"00-{TRACE_ID}-{CALLER_SPAN}-01"
            async with session.post(
                f"http://127.0.0.1:{port}/v1/trackings",
                json={"kind": "function_job", "remote_id": rid},
                headers={"traceparent": caller},
            ) as resp:
                assert resp.status == 201
                tracking_id = (await resp.json())["tracking_id"]
            async with asyncio.timeout(30):
                while not sink.received:
                    await asyncio.sleep(0.1)
            assert serve.terminate() == 0  # spans still buffered are exported on the way out
    finally:
        serve.ensure_dead()
        await sink.close()
        await receiver.close()
        await sim.close()

    spans = [s for s in receiver.spans if s.trace_id.hex() == TRACE_ID]
    assert spans and len(spans) == len(receiver.spans)  # every span is in the caller's trace
    [intake] = [s for s in spans if s.kind == Span.SPAN_KIND_SERVER]
    assert intake.name == "POST /v1/trackings"
    assert intake.parent_span_id.hex() == CALLER_SPAN
    assert _attrs(intake)["http.response.status_code"] == 201
    own = intake.span_id.hex()
    reads = [s for s in spans if s.kind == Span.SPAN_KIND_CLIENT and s.name == "GET"]
    assert reads and all(s.parent_span_id.hex() == own for s in reads)
    assert all(rid in _attrs(s)["url.full"] for s in reads)
    [terminal] = [s for s in spans if s.name == "tracking terminal"]
    assert terminal.parent_span_id.hex() == own
    assert _attrs(terminal)["orchestrator.tracking_id"] == tracking_id
    [delivery] = [s for s in spans if s.kind == Span.SPAN_KIND_CLIENT and s.name == "POST"]
    assert delivery.parent_span_id.hex() == own
    assert _attrs(delivery)["http.response.status_code"] == 204
    [(_, headers, body)] = sink.received
    assert headers["traceparent"] == f"00-{TRACE_ID}-{delivery.span_id.hex()}-01"
    Webhook(SECRET).verify(body, headers)
    event = from_http_event(HTTPMessage(headers=headers, body=body))
    assert event.get_subject() == tracking_id
    assert event.get_extension("traceparent") == f"00-{TRACE_ID}-{own}-01"
