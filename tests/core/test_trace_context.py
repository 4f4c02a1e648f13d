"""The caller's W3C trace context, from intake to the terminal event and its delivery.

A ``traceparent`` (and ``tracestate``) sent with a tracking is stored with it and
comes back as the CloudEvents Distributed Tracing extension's attributes on its
events (structured and binary mode, the feed), across a SIGKILL and a restart;
each delivery attempt sends a ``traceparent`` of its own span in the same trace.
Malformed values are ignored, never refused, and counted.
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from cloudevents.core.bindings.http import HTTPMessage, from_http_event
from standardwebhooks import Webhook

from orchestrator.simulator import start_simulator
from tests.core.conftest import Api
from tests.core.test_restart import write_config
from tests.serveproc import ServeProcess, free_port

SECRET = "whsec_" + base64.b64encode(b"trace-sink-secret-32-bytes-long!").decode()
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
STATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"


class Sink:
    """Records every delivery: (path, headers, body); answers 204."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, str], bytes]] = []
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def handle(self, request: web.Request) -> web.Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.received.append((request.path, headers, await request.read()))
        return web.Response(status=204)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{name}", self.handle)
        self.runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def close(self) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


def _attempt_parent(headers: dict[str, str]) -> str:
    """The delivery's own ``traceparent``: the caller's trace, a span of its own."""
    version, trace_id, span_id, flags = headers["traceparent"].split("-")
    assert (version, trace_id, flags) == ("00", TRACE_ID, "01")
    assert span_id not in ("00f067aa0ba902b7", "0" * 16)
    return span_id


async def test_the_callers_trace_reaches_the_terminal_event_across_a_sigkill(
    tmp_path: Path,
) -> None:
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=5)
    sink = Sink()
    await sink.start()
    port = free_port()
    cfg = write_config(tmp_path, sim.url, port)
    cfg.write_text(
        cfg.read_text()
        + f"""
[[events.sinks]]
name = "structured"
url = "http://127.0.0.1:{sink.port}/structured"
secret_env = "TRACE_SINK_SECRET"

[[events.sinks]]
name = "binary"
url = "http://127.0.0.1:{sink.port}/binary"
secret_env = "TRACE_SINK_SECRET"
mode = "binary"
"""
    )
    serve = ServeProcess(cfg, port, tmp_path / "serve.log", env={"TRACE_SINK_SECRET": SECRET})
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            await serve.start(session)
            steps = [{"after_s": 0, "status": "Queued"}, {"after_s": 3, "status": "Completed"}]
            async with session.post(
                f"{sim.url}/_sim/script", json={"kind": "function_job", "steps": steps}
            ) as resp:
                rid = (await resp.json())["id"]
            headers = {"traceparent": CALLER, "tracestate": STATE}
            async with session.post(
                f"{base}/v1/trackings",
                json={"kind": "function_job", "remote_id": rid},
                headers=headers,
            ) as resp:
                assert resp.status == 201
                tracking_id = (await resp.json())["tracking_id"]
            serve.kill()  # before the job ends: the context must come back from the store
            await serve.start(session)
            async with asyncio.timeout(30):
                while len(sink.received) < 2:
                    await asyncio.sleep(0.1)
            by_path = {path: (h, body) for path, h, body in sink.received}
            spans = set()
            for path in ("/structured", "/binary"):
                got, body = by_path[path]
                Webhook(SECRET).verify(body, got)  # the signature covers the event as before
                event = from_http_event(HTTPMessage(headers=got, body=body))
                assert event.get_subject() == tracking_id
                assert event.get_type() == "com.moltaro.orchestrator.tracking.succeeded"
                assert event.get_extension("traceparent") == CALLER
                assert event.get_extension("tracestate") == STATE
                spans.add(_attempt_parent(got))
            assert len(spans) == 2  # one span per delivery attempt
            assert by_path["/binary"][0]["ce-traceparent"] == CALLER
            async with session.get(f"{base}/v1/events?after=0") as resp:
                [shown] = [e for e in (await resp.json())["events"] if e["subject"] == tracking_id]
            assert (shown["traceparent"], shown["tracestate"]) == (CALLER, STATE)
            assert serve.terminate() == 0
    finally:
        serve.ensure_dead()
        await sink.close()
        await sim.close()


async def _events_of(api: Api, tracking_ids: list[str]) -> dict[str, dict[str, Any]]:
    for tracking_id in tracking_ids:
        await api.wait_terminal(tracking_id)
    status, body = await api.call("GET", "/v1/events?after=0")
    assert status == 200
    return {
        e["subject"]: e
        for e in body["events"]
        if e["subject"] in tracking_ids and not e["type"].endswith("status_changed")
    }


def _ignored(metrics: str, field: str) -> float:
    for line in metrics.splitlines():
        if line.startswith(f'orchestrator_trace_context_ignored_total{{field="{field}"}}'):
            return float(line.split()[-1])
    return 0.0


async def test_malformed_trace_context_is_ignored_counted_and_never_refused(api: Api) -> None:
    done = [{"after_s": 0, "status": "Completed"}]
    bad_parent = await api.script("function_job", done)
    bad_state = await api.script("function_job", done)
    cases = [
        (bad_parent, {"traceparent": f"00-{TRACE_ID}-0000000000000000-01", "tracestate": STATE}),
        (bad_state, {"traceparent": CALLER, "tracestate": "Not A Key=1"}),
    ]
    ids = []
    for rid, headers in cases:
        status, body = await api.call(
            "POST", "/v1/trackings", json={"kind": "function_job", "remote_id": rid},
            headers=headers,
        )  # fmt: skip
        assert status == 201, body
        ids.append(body["tracking_id"])
    events = await _events_of(api, ids)
    assert "traceparent" not in events[ids[0]]  # dropped, and its tracestate with it
    assert "tracestate" not in events[ids[0]]
    assert events[ids[1]]["traceparent"] == CALLER  # kept without the bad tracestate
    assert "tracestate" not in events[ids[1]]
    metrics = await api.metrics_text()
    assert _ignored(metrics, "traceparent") == 1
    assert _ignored(metrics, "tracestate") == 1


async def test_a_batch_item_carries_its_own_context_else_the_requests(api: Api) -> None:
    done = [{"after_s": 0, "status": "Completed"}]
    own = f"00-{'a' * 32}-{'b' * 16}-00"
    rids = [await api.script("function_job", done) for _ in range(3)]
    items = [
        {"kind": "function_job", "remote_id": rids[0]},
        {"kind": "function_job", "remote_id": rids[1], "traceparent": own, "tracestate": "k=v"},
        {"kind": "function_job", "remote_id": rids[2], "traceparent": "junk"},
    ]
    status, body = await api.call(
        "POST", "/v1/trackings/batch", json={"items": items},
        headers={"traceparent": CALLER, "tracestate": STATE},
    )  # fmt: skip
    assert status == 200, body
    assert [i["status"] for i in body["items"]] == [201, 201, 201]
    ids = [i["tracking"]["tracking_id"] for i in body["items"]]
    events = await _events_of(api, ids)
    assert (events[ids[0]]["traceparent"], events[ids[0]]["tracestate"]) == (CALLER, STATE)
    assert (events[ids[1]]["traceparent"], events[ids[1]]["tracestate"]) == (own, "k=v")
    assert "traceparent" not in events[ids[2]]  # its own, malformed: none, not the header's
    assert _ignored(await api.metrics_text(), "traceparent") == 1


async def test_time_to_terminal_carries_the_trace_id_as_an_exemplar(api: Api) -> None:
    rid = await api.script("function_job", [{"after_s": 0, "status": "Completed"}])
    status, body = await api.call(
        "POST", "/v1/trackings", json={"kind": "function_job", "remote_id": rid},
        headers={"traceparent": CALLER},
    )  # fmt: skip
    assert status == 201, body
    await api.wait_terminal(body["tracking_id"])
    accept = {"Accept": "application/openmetrics-text; version=1.0.0"}
    async with api.session.get(api.url + "/metrics", headers=accept) as resp:
        assert resp.content_type == "application/openmetrics-text"
        text = await resp.text()
    exemplars = [
        line
        for line in text.splitlines()
        if line.startswith("orchestrator_time_to_terminal_seconds_bucket") and " # {" in line
    ]
    assert exemplars and all(f'trace_id="{TRACE_ID}"' in line for line in exemplars)
