"""A workspace's refusal is carried to the caller, its secrets never (issue #37).

A scripted workspace on loopback keeps one job Queued (cancellable, stoppable)
and refuses every command and catalog read with a problem that quotes the
token the service sent it, in its text and in members of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web

from tests.platform.conftest import Api, StartService

TOKEN = "ws-secret-7f3a9c"
JOB = "job-refused-1"
MODIFIED_AT = "2026-05-01T12:00:00.000Z"
ALLOWED = {"type", "title", "status", "detail", "errors"}


def refusal(status: int) -> web.Response:
    """An ASP.NET-style problem that leaks the bearer token it was sent."""
    body = {
        "type": "https://tools.ietf.org/html/rfc9110#section-15.5.1",
        "title": "One or more validation errors occurred.",
        "status": status,
        "detail": f"request with Authorization: Bearer {TOKEN} refused",
        "errors": {"ExpectedModifiedAt": [f"not accepted for token {TOKEN}"]},
        "traceId": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "token": TOKEN,
        "request": {"headers": {"Authorization": f"Bearer {TOKEN}"}},
    }
    return web.Response(
        status=status, body=orjson.dumps(body), content_type="application/problem+json"
    )


class RefusingWorkspace:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str | None]] = []  # method, path, Authorization
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application(middlewares=[self._log])
        jobs = "/api/workspace/functions/jobs/{id}"
        app.router.add_get(jobs, self._job)
        app.router.add_post(jobs + "/cancel", self._refuse_400)
        ops = "/api/workspace/admin/function-operations/jobs/{id}"
        app.router.add_post(ops + "/stop-retries", self._refuse_422)
        app.router.add_get("/api/workspace/admin/{tail:.*}", self._refuse_400)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    @web.middleware
    async def _log(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.seen.append((request.method, request.path, request.headers.get("Authorization")))
        response: web.StreamResponse = await handler(request)
        return response

    async def _job(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "JobId": request.match_info["id"],
                "Status": "Queued",
                "CanCancel": True,
                "CanStopRetries": True,
                "RetryStopState": "None",
                "ModifiedAt": MODIFIED_AT,
            }
        )

    async def _refuse_400(self, _: web.Request) -> web.Response:
        return refusal(400)

    async def _refuse_422(self, _: web.Request) -> web.Response:
        return refusal(422)

    def commands(self) -> list[str]:
        return [f"{m} {p}" for m, p, _ in self.seen if m == "POST" or "/admin/" in p]

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def refusing(
    start_service: StartService, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Api, RefusingWorkspace]]:
    workspace = RefusingWorkspace()
    await workspace.start()
    monkeypatch.setenv("ORCH_TEST_REFUSING_TOKEN", TOKEN)
    try:
        api = await start_service(
            workspaces=[
                {
                    "name": "default",
                    "base_url": workspace.url,
                    "token_env": "ORCH_TEST_REFUSING_TOKEN",
                    "request_timeout_s": 2,
                }
            ]
        )
        yield api, workspace
    finally:
        await workspace.close()


async def _call(api: Api, method: str, path: str, json: Any = None) -> tuple[int, Any, str]:
    async with api.session.request(method, api.url + path, json=json) as resp:
        text = await resp.text()
        return resp.status, orjson.loads(text), text


def _carried(body: dict[str, Any], status: int) -> dict[str, Any]:
    """The workspace's problem as we carry it: only its standard members."""
    assert body["workspace_status"] == status, body
    carried: dict[str, Any] = body["workspace_problem"]
    assert set(carried) <= ALLOWED, carried
    assert carried["status"] == status and carried["title"], carried
    assert "[redacted]" in carried["detail"], carried
    return carried


async def test_refusals_carry_the_workspace_problem_and_never_its_secret(
    refusing: tuple[Api, RefusingWorkspace],
) -> None:
    api, workspace = refusing
    tracking = await api.track(kind="function_job", remote_id=JOB)
    tid = tracking["tracking_id"]

    status, body, text = await _call(api, "POST", f"/v1/trackings/{tid}/cancel")
    assert status == 422, body
    assert body["title"] == "Refused by the workspace" and body["remote_status"] == "Queued"
    _carried(body, 400)
    assert TOKEN not in text

    path = f"/v1/trackings/{tid}/stop-retries"
    status, body, text = await _call(api, "POST", path, {"expected_modified_at": MODIFIED_AT})
    assert status == 422, body
    carried = _carried(body, 422)
    assert carried["errors"] == {"ExpectedModifiedAt": ["not accepted for token [redacted]"]}
    assert TOKEN not in text

    # The catalog read carried nothing of the caller's: the workspace's error, not a refusal.
    model = "/v1/functions/billing.sync-invoices/execution-model"
    status, body, text = await _call(api, "GET", model)
    assert status == 502 and body["error_kind"] == "invalid_response", body
    _carried(body, 400)
    assert TOKEN not in text

    # The token was in play: the workspace received it with every command and read.
    assert workspace.commands()[:2] == [
        f"POST /api/workspace/functions/jobs/{JOB}/cancel",
        f"POST /api/workspace/admin/function-operations/jobs/{JOB}/stop-retries",
    ]
    assert {auth for _, _, auth in workspace.seen} == {f"Bearer {TOKEN}"}
    # A bad version after all that: refused here, and the workspace sees no more commands.
    before = workspace.commands()
    status, body, _ = await _call(api, "POST", path, {"expected_modified_at": "yesterday"})
    assert status == 422 and body["field"] == "expected_modified_at", body
    assert workspace.commands() == before
