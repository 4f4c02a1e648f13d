"""Reads that return the same bytes as before are not judged twice; a change always is.

The engine keeps a digest of the last ordinary in-progress body and skips parsing an
identical one. These tests pin what must still hold through the public surface: a
change after many identical reads is seen, and identical bytes are judged afresh when
the workspace's enums change meaning.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.core.conftest import Api, StartService

OPENAPI = "/swagger/v1/swagger.json"


async def _wait_polls(api: Api, tracking_id: str, at_least: int) -> dict[str, Any]:
    async with asyncio.timeout(10):
        while True:
            status, body = await api.call("GET", f"/v1/trackings/{tracking_id}")
            assert status == 200, body
            if body["polls"] >= at_least:
                return body  # type: ignore[no-any-return]
            await asyncio.sleep(0.05)


async def test_change_after_many_identical_reads_is_seen(api: Api) -> None:
    rid = await api.script(
        "function_job",
        [
            {"after_s": 0, "status": "Queued"},
            # Long enough for four reads of the same Queued body on a slow machine.
            {"after_s": 2.5, "status": "Leased"},
            {"after_s": 3.0, "status": "Completed"},
        ],
    )
    tracking = await api.track(kind="function_job", remote_id=rid, notify="all")
    queued = await _wait_polls(api, tracking["tracking_id"], 4)
    assert queued["remote_status"] == "Queued"
    done = await api.wait_terminal(tracking["tracking_id"])
    assert done["outcome"] == "succeeded"
    assert done["polls"] >= 5
    # Every move was noticed and reported once: Queued, Leased, then the end.
    status, feed = await api.call("GET", "/v1/events?limit=100")
    assert status == 200, feed
    moves = [
        e["data"]["remote_status"]
        for e in feed["events"]
        if e["subject"] == tracking["tracking_id"] and e["type"].endswith("status_changed")
    ]
    assert moves == ["Queued", "Leased"]


class _EnumSwitchingWorkspace:
    """The simulator behind a proxy whose OpenAPI document can change its enum names."""

    def __init__(self, sim_url: str) -> None:
        self.sim_url = sim_url
        self.document: dict[str, Any] = {}
        self.url = ""
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession()
        async with self._session.get(self.sim_url + OPENAPI) as resp:
            self.document = await resp.json()
        app = web.Application()
        app.router.add_get(OPENAPI, self._openapi)
        app.router.add_get("/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    def rename_ui_build_status(self, names: list[str]) -> None:
        document = copy.deepcopy(self.document)
        document["components"]["schemas"]["WorkspaceUiBuildStatus"]["x-enum-varnames"] = names
        self.document = document

    async def _openapi(self, _: web.Request) -> web.Response:
        return web.json_response(self.document)

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._session is not None
        async with self._session.get(self.sim_url + request.path_qs) as resp:
            return web.Response(
                status=resp.status, body=await resp.read(), content_type="application/json"
            )

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()


@pytest.fixture
async def switching(sim_url: str) -> AsyncIterator[_EnumSwitchingWorkspace]:
    workspace = _EnumSwitchingWorkspace(sim_url)
    await workspace.start()
    try:
        yield workspace
    finally:
        await workspace.close()


async def test_same_bytes_are_judged_again_when_enums_change_meaning(
    start_service: StartService, switching: _EnumSwitchingWorkspace
) -> None:
    api = await start_service(
        polling={"openapi_refresh_s": 0.3},
        workspaces=[{"name": "default", "base_url": switching.url, "request_timeout_s": 2}],
    )
    rid = await api.script("workspace_ui_build", [{"after_s": 0, "status": "Running"}])
    tracking = await api.track(kind="workspace_ui_build", remote_id=rid)
    running = await _wait_polls(api, tracking["tracking_id"], 4)
    assert running["state"] == "active" and running["remote_status"] == "Running"
    # The body keeps saying Status 1; the installed document now names 1 "Cancelled".
    switching.rename_ui_build_status(["Queued", "Cancelled", "Succeeded", "Failed", "Running"])
    done = await api.wait_terminal(tracking["tracking_id"], timeout=10)
    assert done["outcome"] == "cancelled"
    assert done["remote_status"] == "Cancelled"


async def _stop(api: Api) -> None:
    """Stop the running in-process service gracefully and wait for it to end."""
    task = next(
        t for t in asyncio.all_tasks() if t.get_name() == "service-under-test" and not t.done()
    )
    api.service.request_stop()
    assert await asyncio.wait_for(task, 15) == 0


async def test_a_change_while_stopped_is_seen_by_the_next_start(
    start_service: StartService,
) -> None:
    first = await start_service()
    rid = await first.script(
        "function_job",
        [{"after_s": 0, "status": "Queued"}, {"after_s": 1.5, "status": "Completed"}],
    )
    tracking = await first.track(kind="function_job", remote_id=rid)
    await _wait_polls(first, tracking["tracking_id"], 3)
    await _stop(first)
    await asyncio.sleep(1.6)  # the job completes while nobody watches
    second = await start_service()
    done = await second.wait_terminal(tracking["tracking_id"])
    assert done["outcome"] == "succeeded"


async def test_enums_changed_across_a_restart_judge_the_same_bytes_afresh(
    start_service: StartService, switching: _EnumSwitchingWorkspace
) -> None:
    workspaces = [{"name": "default", "base_url": switching.url, "request_timeout_s": 2}]
    first = await start_service(workspaces=workspaces)
    rid = await first.script("workspace_ui_build", [{"after_s": 0, "status": "Running"}])
    tracking = await first.track(kind="workspace_ui_build", remote_id=rid)
    running = await _wait_polls(first, tracking["tracking_id"], 3)
    assert running["remote_status"] == "Running"
    await _stop(first)
    # Status 1 is now named Cancelled: the stored knowledge of those bytes is stale.
    switching.rename_ui_build_status(["Queued", "Cancelled", "Succeeded", "Failed", "Running"])
    second = await start_service(workspaces=workspaces)
    done = await second.wait_terminal(tracking["tracking_id"], timeout=10)
    assert done["outcome"] == "cancelled"
