"""Never unsigned by accident: ``orchestrator serve`` as a subprocess, per sink secret.

A sink whose secret variable is unset, or holds something that is not a
``whsec_`` secret, stops start-up (exit 2, one line naming the sink and the
variable, the value never shown); ``signing = "none"`` starts, warns once, and
delivers without a signature.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import aiohttp
import orjson
import pytest
from aiohttp import web

from orchestrator.simulator import start_simulator
from tests.core.test_restart import write_config
from tests.serveproc import ServeProcess, free_port

NOT_WHSEC = "super-secret-plain-value"


class RecordingSink:
    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def handle(self, request: web.Request) -> web.Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.received.append((headers, await request.read()))
        return web.Response(status=204)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/hooks", self.handle)
        self.runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def close(self) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


def _config(tmp_path: Path, port: int, sink_lines: str) -> Path:
    # The workspace is never reached in the failing cases: start-up stops first.
    cfg = write_config(tmp_path, "http://127.0.0.1:9", port)
    cfg.write_text(cfg.read_text() + '\n[[events.sinks]]\nname = "app"\n' + sink_lines)
    return cfg


def _serve(cfg: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ORCH_")}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", "serve", "--config", str(cfg)],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("env", "says"),
    [({}, "unset or empty"), ({"APP_SINK_SECRET": NOT_WHSEC}, "does not hold a whsec_ secret")],
    ids=["unset", "not-whsec"],
)
def test_a_sink_without_a_usable_secret_stops_start_up(
    tmp_path: Path, env: dict[str, str], says: str
) -> None:
    sink = 'url = "http://127.0.0.1:9/hooks"\nsecret_env = "APP_SINK_SECRET"\n'
    done = _serve(_config(tmp_path, free_port(), sink), env)
    assert done.returncode == 2, done.stderr
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1, lines  # one line, no traceback
    assert '"app"' in lines[0] and "APP_SINK_SECRET" in lines[0] and says in lines[0]
    assert NOT_WHSEC not in lines[0]


def test_callbacks_allowed_without_their_secret_stop_start_up(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, "http://127.0.0.1:9", free_port())
    cfg.write_text(cfg.read_text() + '\n[events]\ncallback_allowlist = ["http://127.0.0.1:"]\n')
    done = _serve(cfg, {})
    assert done.returncode == 2, done.stderr
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1 and "ORCH_CALLBACK_SECRET" in lines[0], lines


async def test_signing_none_starts_warns_once_and_sends_unsigned(tmp_path: Path) -> None:
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=3)
    sink = RecordingSink()
    await sink.start()
    port = free_port()
    cfg = write_config(tmp_path, sim.url, port)
    cfg.write_text(
        cfg.read_text()
        + f'\n[[events.sinks]]\nname = "app"\nurl = "http://127.0.0.1:{sink.port}/hooks"\n'
        + 'signing = "none"\n'
    )
    serve = ServeProcess(cfg, port, tmp_path / "serve.log")
    try:
        async with aiohttp.ClientSession() as session:
            await serve.start(session)
            async with session.get(f"{serve.url}/v1/sinks") as resp:
                (state,) = (await resp.json())["items"]
            assert state["name"] == "app" and state["signed"] is False
            async with session.post(
                f"{sim.url}/_sim/script",
                json={"kind": "function_job", "steps": [{"after_s": 0, "status": "Completed"}]},
            ) as resp:
                rid = (await resp.json())["id"]
            body = {"kind": "function_job", "remote_id": rid}
            async with session.post(f"{serve.url}/v1/trackings", json=body) as resp:
                assert resp.status == 201
            async with asyncio.timeout(30):
                while not sink.received:
                    await asyncio.sleep(0.05)
            assert serve.terminate() == 0
    finally:
        serve.ensure_dead()
        await sink.close()
        await sim.close()
    headers, _ = sink.received[0]
    assert "webhook-signature" not in headers
    assert "webhook-id" in headers  # still a Standard Webhooks delivery, only unsigned
    records = [orjson.loads(line) for line in serve.tail(10**6).splitlines() if line[:1] == "{"]
    warnings = [r for r in records if r.get("level") == "warning" and "unsigned" in r["msg"]]
    assert len(warnings) == 1, warnings
    assert '"app"' in warnings[0]["msg"]


def _documented_container_env() -> dict[str, str]:
    """The -e settings of docs/operations.md's `podman run` that concern events."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    found = re.findall(
        r"-e '?((?:ORCH_EVENTS__SINKS|ORCH_SINK_SECRET|ORCH_API_TOKENS)=[^' ]+)'?", text
    )
    env = dict(item.split("=", 1) for item in found)
    assert set(env) == {"ORCH_EVENTS__SINKS", "ORCH_SINK_SECRET", "ORCH_API_TOKENS"}, found
    return env


async def test_the_container_s_documented_sink_environment_still_starts(tmp_path: Path) -> None:
    port = free_port()
    # The workspace is a closed loopback port: nothing leaves this machine.
    cfg = write_config(tmp_path, "http://127.0.0.1:9", port)
    serve = ServeProcess(cfg, port, tmp_path / "serve.log", env=_documented_container_env())
    try:
        async with aiohttp.ClientSession() as session:
            await serve.start(session)
            token = {"Authorization": "Bearer " + _documented_container_env()["ORCH_API_TOKENS"]}
            async with session.get(f"{serve.url}/v1/sinks", headers=token) as resp:
                (state,) = (await resp.json())["items"]
            assert state["name"] == "app" and state["signed"] is True
        assert serve.terminate() == 0
    finally:
        serve.ensure_dead()
