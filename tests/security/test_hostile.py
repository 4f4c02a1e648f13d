"""Hostile input against the live service: every refusal is a 4xx problem, nothing escapes."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from tests.security.catalog import hostile_intake_bodies, hostile_raw_bodies
from tests.security.conftest import Live


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def assert_problem(status: int, ctype: str, body: Any, *, lo: int = 400, hi: int = 499) -> None:
    assert lo <= status <= hi, (status, body)
    assert ctype == "application/problem+json", (ctype, body)
    assert isinstance(body, dict), body
    assert isinstance(body["type"], str) and isinstance(body["title"], str), body
    assert body["status"] == status, body


async def call(
    http: aiohttp.ClientSession,
    live: Live,
    method: str,
    path: str,
    *,
    json: Any = None,
    data: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, str, Any]:
    hdrs = {**live.auth, **(headers or {})}
    payload: Any = None
    if data is not None:
        hdrs.setdefault("Content-Type", "application/json")
        payload = io.BytesIO(data)  # a stream: aiohttp warns on large raw bytes
    async with http.request(method, live.url + path, json=json, data=payload, headers=hdrs) as resp:
        text = await resp.text()
        body: Any = None
        if text:
            try:
                body = await resp.json(content_type=None)
            except ValueError:
                body = text
        return resp.status, resp.content_type, body


async def tracked_remote_ids(http: aiohttp.ClientSession, live: Live) -> set[str]:
    out: set[str] = set()
    cursor = None
    while True:
        q = "/v1/trackings?limit=1000" + (f"&cursor={cursor}" if cursor else "")
        status, _, page = await call(http, live, "GET", q)
        assert status == 200, page
        out |= {t["remote_id"] for t in page["items"]}
        cursor = page["next_cursor"]
        if not cursor:
            return out


@pytest.mark.parametrize(
    "query",
    [
        "/v1/events?after=99999999999999999999",
        "/v1/events?after=%C2%B2",
        "/v1/events?limit=%D9%A1",
        "/v1/events?after=-1",
        "/v1/events?after=1e3",
        "/v1/trackings?limit=%C2%B2",
        "/v1/trackings?limit=99999999999999999999",
        "/v1/trackings?cursor=%00%FF",
        "/v1/trackings?cursor=" + "A" * 5000,
        "/v1/trackings?label=%00:%00",
        "/v1/trackings?state=%0D%0AX:1",
        "/v1/deliveries?limit=%C2%B2",
        "/v1/deliveries?state=../x",
        "/v1/deliveries?cursor=!!",
    ],
)
async def test_hostile_query_parameters_get_a_problem_not_a_crash(
    http: aiohttp.ClientSession, live: Live, query: str
) -> None:
    async with http.get(live.url + query, headers=live.auth) as resp:
        body = await resp.json(content_type=None)
        if resp.status == 200:
            return  # harmless values (an unknown label) just match nothing
        assert_problem(resp.status, resp.content_type, body)


@pytest.mark.parametrize(
    "path", ["/v1/deliveries/99999999999999999999/retry", "/v1/deliveries/%C2%B2/retry"]
)
async def test_hostile_delivery_ids_are_not_found(
    http: aiohttp.ClientSession, live: Live, path: str
) -> None:
    status, ctype, body = await call(http, live, "POST", path)
    assert status == 404
    assert_problem(status, ctype, body)


async def test_hostile_intake_bodies_are_refused_and_create_nothing(
    http: aiohttp.ClientSession, live: Live
) -> None:
    before = await tracked_remote_ids(http, live)
    cases = hostile_intake_bodies(live.sim_url, live.callback_prefix)
    assert len(cases) > 100
    for name, body in cases:
        status, ctype, answer = await call(http, live, "POST", "/v1/trackings", json=body)
        assert_problem(status, ctype, answer)
        assert "field" in answer or status != 422, (name, answer)
        items = {"items": [body]}
        status, _, batch = await call(http, live, "POST", "/v1/trackings/batch", json=items)
        if status == 200:  # per item: a problem naming items.0.<field>
            assert 400 <= batch["items"][0]["status"] < 500, (name, batch)
        else:
            assert 400 <= status < 500, (name, batch)
    assert await tracked_remote_ids(http, live) == before
    # No request of the service reached anything but the status route of a valid id.
    async with http.get(live.sim_url + "/_sim/stats") as resp:
        routes = (await resp.json())["routes"]
    assert set(routes) <= {"job_status", "build_status", "openapi", "control"}, routes


async def test_hostile_raw_bodies_are_refused(http: aiohttp.ClientSession, live: Live) -> None:
    for name, raw in hostile_raw_bodies():
        status, ctype, answer = await call(http, live, "POST", "/v1/trackings", data=raw)
        assert_problem(status, ctype, answer), name
    status, ctype, answer = await call(
        http, live, "POST", "/v1/trackings", data=b'{"kind":"' + b"x" * 2_000_000 + b'"}'
    )
    assert status == 413
    assert_problem(status, ctype, answer)
    wrong_type = {"Content-Type": "text/plain"}
    status, ctype, answer = await call(
        http, live, "POST", "/v1/trackings", data=b"{}", headers=wrong_type
    )
    assert status == 415
    assert_problem(status, ctype, answer)
    async with http.get(live.url + "/readyz") as resp:
        assert resp.status == 200


@pytest.mark.parametrize(
    "value",
    [
        "\u0000",
        "\u202eevil\u202c",
        "😀" * 50,
        "\ufeff",
        "a\r\nX-Injected: 1",
        "\\u0000",
        "\uff45\uff56\uff49\uff4c",
    ],
)
async def test_unicode_labels_are_data_end_to_end(
    http: aiohttp.ClientSession, live: Live, value: str
) -> None:
    body = {
        "kind": "function_job",
        "remote_id": f"J-uni-{abs(hash(value))}",
        "labels": {"k": value},
    }
    body["correlation_id"] = value
    status, _, created = await call(http, live, "POST", "/v1/trackings", json=body)
    assert status == 201, created
    tid = created["tracking_id"]
    status, _, again = await call(http, live, "GET", f"/v1/trackings/{tid}")
    assert again["labels"] == {"k": value} and again["correlation_id"] == value


async def test_header_injection_never_reaches_outbound_requests(
    http: aiohttp.ClientSession, live: Live
) -> None:
    async with http.post(
        live.sim_url + "/_sim/script",
        json={"kind": "function_job", "steps": [{"after_s": 0.2, "status": "Completed"}]},
    ) as resp:
        rid = (await resp.json())["id"]
    injected = "x\r\nX-Injected: yes\r\n\r\nPOST /evil HTTP/1.1"
    body = {
        "kind": "function_job",
        "remote_id": rid,
        "labels": {"evil": injected[:200]},
        "correlation_id": injected,
        "callback_url": live.callback_prefix + "/one",
    }
    status, _, created = await call(http, live, "POST", "/v1/trackings", json=body)
    assert status == 201, created
    tid = created["tracking_id"]
    async with asyncio.timeout(30):
        while len([h for h in live.sink.hits if h.event["subject"] == tid]) < 2:
            await asyncio.sleep(0.1)  # the configured sink and the callback
    for hit in live.sink.hits:
        assert not any(k.lower().startswith("x-injected") for k in hit.headers), hit.headers
        if hit.event["subject"] == tid:
            assert hit.event["data"]["correlation_id"] == injected


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "bearer {bad}",
        "Basic {tok}",
        "Token {tok}",
        "Bearer  {tok}",
        "Bearer\t{tok}",
        "Bearer {tok},{tok}",
        "Bearer {tok}, other",
        "Bearer {tok}x",
        "Bearer {short}",
        "Bearer *",
        "Bearer {tok}\x00",
    ],
)
async def test_bad_authorization_is_401(live: Live, authorization: str | None) -> None:
    lines = ["GET /v1/trackings HTTP/1.1", "Host: x", "Connection: close"]
    if authorization is not None:
        tok = live.token
        value = authorization.format(tok=tok, bad=tok.upper(), short=tok[:-1])
        lines.append(f"Authorization: {value}")
    status, _ = await raw_request(live, lines)
    assert status in (400, 401), status


async def test_case_variants_of_the_scheme_are_accepted_only_with_the_exact_token(
    live: Live,
) -> None:
    for scheme in ("Bearer", "bearer", "BEARER"):
        status, _ = await raw_request(
            live, ["GET /v1/trackings HTTP/1.1", "Host: x", f"Authorization: {scheme} {live.token}"]
        )
        assert status == 200
    # Two Authorization headers, one good: never let the good one vouch for the other.
    status, _ = await raw_request(
        live,
        [
            "GET /v1/trackings HTTP/1.1",
            "Host: x",
            "Authorization: Bearer nope",
            f"Authorization: Bearer {live.token}",
        ],
    )
    assert status in (400, 401), status


@pytest.mark.parametrize(
    "path",
    [
        "//v1/trackings",
        "/v1/../v1/trackings",
        "/v1/./trackings",
        "/x/../v1/trackings",
        "/V1/trackings",
        "/v1/Trackings",
        "/%76%31/trackings",
        "/v1%2Ftrackings",
        "/v1/trackings%2F",
        "/v1/trackings/",
        "/v1/trackings;x",
        "/v1/trackings?%00",
        "/./v1/trackings",
        "/v1//trackings",
        "/%2e%2e/v1/trackings",
        "http://127.0.0.1/v1/trackings",
        "/v1\\trackings",
        "*",
    ],
)
async def test_path_tricks_never_reach_data_without_a_token(live: Live, path: str) -> None:
    status, body = await raw_request(live, [f"GET {path} HTTP/1.1", "Host: x"])
    assert status in (400, 401, 404, 405), (status, body[:300])
    assert b'"items"' not in body


async def raw_request(live: Live, lines: list[str]) -> tuple[int, bytes]:
    """A hand-written HTTP/1.1 request: clients would normalise what we want to send."""
    host, port = live.url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        if not any(line.lower().startswith("connection:") for line in lines):
            lines = [*lines, "Connection: close"]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape"))
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
    return status, body


async def test_crlf_in_request_headers_is_refused(live: Live) -> None:
    status, _ = await raw_request(
        live,
        ["GET /v1/trackings HTTP/1.1", "Host: x", f"Authorization: Bearer {live.token}\rX: y"],
    )
    assert status in (400, 401)


async def test_secrets_never_appear_in_logs_events_problems_or_metrics(
    http: aiohttp.ClientSession, live: Live
) -> None:
    s = live.secrets
    # Provoke every path that might echo a credential back.
    for value in (s.api_token + "x", s.workspace_token, s.sink_secret, f"{s.api_token} x"):
        status, _, problem = await call(
            http, live, "GET", "/v1/trackings", headers={"Authorization": f"Bearer {value}"}
        )
        assert status == 401
        assert not any(secret in str(problem) for secret in s.values())
    status, _, problem = await call(
        http,
        live,
        "POST",
        "/v1/trackings",
        json={"kind": "function_job", "remote_id": s.api_token + "/"},
    )
    assert status == 422
    status, _, events = await call(http, live, "GET", "/v1/events?after=0&limit=1000")
    status, _, deliveries = await call(http, live, "GET", "/v1/deliveries?limit=1000")
    async with http.get(live.url + "/metrics") as resp:
        metrics = await resp.text()
    async with http.get(live.url + "/openapi.json") as resp:
        openapi = await resp.text()
    await asyncio.sleep(0.5)  # let the log lines of the above be written
    log = live.serve.tail(10**9)
    assert "tracking" in log  # the log is there and has content
    for secret in s.values():
        for name, text in (
            ("log", log),
            ("events", str(events)),
            ("deliveries", str(deliveries)),
            ("metrics", metrics),
            ("openapi", openapi),
            ("problem", str(problem)),
        ):
            assert secret not in text, f"a secret leaked into {name}"
    # The workspace really received its token: it was configured, just never shown.
    assert live.sink.hits, "deliveries were signed and sent meanwhile"
