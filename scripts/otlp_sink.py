"""A discarding OTLP/HTTP traces receiver that counts what it is sent.

For measuring the cost of tracing (docs/performance.md): point the service at it
with ``OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:PORT`` and read the count it
prints on SIGINT or SIGTERM. Loopback only.

    python scripts/otlp_sink.py --port 4318
"""

from __future__ import annotations

import argparse
import asyncio
import signal

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


async def serve(port: int) -> None:
    counts = {"requests": 0, "spans": 0}
    answer = ExportTraceServiceResponse().SerializeToString()

    async def traces(request: web.Request) -> web.Response:
        export = ExportTraceServiceRequest.FromString(await request.read())
        counts["requests"] += 1
        counts["spans"] += sum(
            len(scope.spans) for rs in export.resource_spans for scope in rs.scope_spans
        )
        return web.Response(body=answer, content_type="application/x-protobuf")

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/traces", traces)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print(f"listening on 127.0.0.1:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()
    print(f"received {counts['spans']} spans in {counts['requests']} requests", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, default=4318)
    asyncio.run(serve(parser.parse_args().port))


if __name__ == "__main__":
    main()
