"""A real simulator and a real service on loopback, in-process, per test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from orchestrator.config import Settings, load_settings
from orchestrator.service import Service
from orchestrator.simulator import start_simulator

FAST_POLLING = {
    "initial_delay_s": 0.05,
    "max_delay_s": 0.2,
    "multiplier": 2.0,
    "jitter": 0.1,
    "default_deadline_s": 30,
    "max_deadline_s": 3600,
    "not_found_confirmations": 3,
    "not_found_min_s": 0.3,
}


@dataclass
class Api:
    """A client of the running service, as a calling service would use it."""

    url: str
    session: aiohttp.ClientSession
    service: Service
    sim_url: str
    token: str | None = None

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = dict(extra or {})
        if self.token:
            headers.setdefault("Authorization", f"Bearer {self.token}")
        return headers

    async def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        data: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        async with self.session.request(
            method, self.url + path, json=json, data=data, headers=self._headers(headers)
        ) as resp:
            body = await resp.json(content_type=None) if resp.content_length != 0 else None
            return resp.status, body

    async def track(self, **body: Any) -> dict[str, Any]:
        status, out = await self.call("POST", "/v1/trackings", json=body)
        assert status in (200, 201), out
        return out  # type: ignore[no-any-return]

    async def wait_terminal(self, tracking_id: str, timeout: float = 20.0) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            while True:
                status, body = await self.call("GET", f"/v1/trackings/{tracking_id}")
                assert status == 200, body
                if body["state"] == "terminal":
                    return body  # type: ignore[no-any-return]
                await asyncio.sleep(0.05)

    async def sim(self, method: str, path: str, json: Any = None) -> tuple[int, Any]:
        async with self.session.request(method, self.sim_url + path, json=json) as resp:
            return resp.status, await resp.json(content_type=None)

    async def script(self, kind: str, steps: list[dict[str, Any]], **extra: Any) -> str:
        status, body = await self.sim(
            "POST", "/_sim/script", {"kind": kind, "steps": steps, **extra}
        )
        assert status == 201, body
        return str(body["id"])

    async def requests_for(self, remote_id: str) -> list[dict[str, Any]]:
        status, body = await self.sim("GET", f"/_sim/requests?id={remote_id}")
        assert status == 200, body
        # The test's own control calls are logged too; only the service's count.
        return [r for r in body["requests"] if r["route"] != "control"]

    async def metrics_text(self) -> str:
        async with self.session.get(self.url + "/metrics") as resp:
            return await resp.text()


StartService = Callable[..., Awaitable[Api]]


@pytest.fixture
async def sim_url() -> AsyncIterator[str]:
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=7)
    try:
        yield sim.url
    finally:
        await sim.close()


def make_settings(tmp_path: Path, sim_url: str, **sections: Any) -> Settings:
    overrides: dict[str, Any] = {
        "server": {"listen": "127.0.0.1:0", "shutdown_grace_s": 2, "shutdown_hard_s": 2},
        "store": {"path": str(tmp_path / "orch.db")},
        "polling": dict(FAST_POLLING),
        "workspaces": [{"name": "default", "base_url": sim_url, "request_timeout_s": 2}],
        "logging": {"format": "console", "level": "WARNING"},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(overrides.get(key), dict):
            overrides[key] = {**overrides[key], **value}
        else:
            overrides[key] = value
    return load_settings(None, **overrides)


@pytest.fixture
async def start_service(tmp_path: Path, sim_url: str) -> AsyncIterator[StartService]:
    running: list[tuple[Service, asyncio.Task[int], aiohttp.ClientSession]] = []

    async def start(token: str | None = None, **sections: Any) -> Api:
        settings = make_settings(tmp_path, sim_url, **sections)
        service = Service(settings)
        ready = asyncio.Event()

        async def on_ready(_: Service) -> None:
            ready.set()

        task = asyncio.create_task(service.run(on_ready), name="service-under-test")
        waiter = asyncio.create_task(ready.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            waiter.cancel()
            task.result()
            raise AssertionError("service stopped during start-up")
        session = aiohttp.ClientSession()
        running.append((service, task, session))
        return Api(f"http://127.0.0.1:{service.port}", session, service, sim_url, token)

    yield start
    for service, task, session in running:
        service.request_stop()
        try:
            assert await asyncio.wait_for(task, 15) == 0
        finally:
            await session.close()


@pytest.fixture
async def api(start_service: StartService) -> Api:
    return await start_service()
