"""Hostile input against the live service: every refusal is a 4xx problem, nothing escapes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

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
    if data is not None:
        hdrs.setdefault("Content-Type", "application/json")
    async with http.request(method, live.url + path, json=json, data=data, headers=hdrs) as resp:
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
