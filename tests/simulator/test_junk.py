"""Junk thrown at every route gets the 4xx a real server would give, never a 5xx."""

from __future__ import annotations

import io
import re

import aiohttp

from orchestrator.simulator import RunningSimulator

IDS = ("x", "..", "a" * 300, "%C3%A9t%C3%A9", "%00", "job%2F1", "-1")
BODIES: tuple[bytes | None, ...] = (
    None,
    b"{",
    b"[]",
    b"null",
    b'"text"',
    b"1e400",
    b"\xff\xfe",
    b'{"Kind": {"a": 1}, "ExpectedModifiedAt": [], "DeduplicationKey": 5, "CorrelationId": {}}',
    b'{"steps": "x", "kind": "function_job", "rules": 3, "camel_case": "yes"}',
    b'{"Cron": 5, "FunctionKey": "", "Enabled": "no", "name": 3, "job": []}',
    b'{"kind": "function_job", "steps": [{"status": "Queued", "after_s": "soon"}]}',
    b'{"job": {"pickup_s": [3, 1]}, "build": {"outcomes": {}}}',
)
QUERIES = (
    "",
    "?Limit=-1&Status=&From=%ZZ&Source=[]&To=2020-13-45",
    "?id=&Limit=99999999999999999999",
)
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def concrete_paths(template: str) -> list[str]:
    if "{project}" in template:
        return [
            path
            for project in ("net-operation-project", "ui-project")
            for path in concrete_paths(template.replace("{project}", project))
        ]
    if "{" not in template:
        return [template]
    return [re.sub(r"\{[^}]+\}", rid, template) for rid in IDS]


async def test_every_route_answers_junk_with_4xx(sim: RunningSimulator) -> None:
    routes: list[tuple[str, str]] = []
    for route in sim.app.router.routes():
        info = route.resource.get_info() if route.resource is not None else {}
        template = info.get("formatter") or info.get("path")
        if template and route.method != "HEAD":
            routes.append((route.method, template))
    assert len(routes) >= 25
    bad: list[tuple[str, str, int]] = []
    async with aiohttp.ClientSession(base_url=sim.url) as client:
        for method, template in routes:
            for path in concrete_paths(template):
                for query in QUERIES:
                    for body in BODIES:
                        async with client.request(method, path + query, data=body) as response:
                            await response.read()
                            if response.status >= 500:
                                bad.append((method, path + query, response.status))
                for other in METHODS:
                    async with client.request(other, path, data=b"{") as response:
                        if response.status >= 500:
                            bad.append((other, path, response.status))
        for path in ("/", "/api", "/api/workspace/functions/jobs", "/_sim", "/swagger/v2/x.json"):
            async with client.get(path) as response:
                assert response.status == 404
        async with client.post(
            "/api/workspace/functions/a/enqueue", data=io.BytesIO(b"{" * 2_000_000)
        ) as r:
            assert r.status == 413
    assert not bad, bad[:20]
