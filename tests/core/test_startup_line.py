"""The start-up orients: one INFO line with the API, workspaces, sinks, store and simulator."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import orjson

from orchestrator.config import load_settings
from orchestrator.startup_summary import store_description
from tests.serveproc import free_port

SECRET = "whsec_" + base64.b64encode(b"startup-line-secret-32-bytes!!!!").decode()


async def _ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    async with aiohttp.ClientSession() as session, asyncio.timeout(60):
        while True:
            assert proc.poll() is None, "serve exited during start-up"
            try:
                async with session.get(url + "/readyz") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)


async def test_serve_with_simulator_says_where_everything_is_in_one_info_line(
    tmp_path: Path,
) -> None:
    api, sim = free_port(), free_port()
    cfg = tmp_path / "orchestrator.toml"
    cfg.write_text(
        f'[store]\npath = "{tmp_path / "orch.db"}"\n\n'
        '[[events.sinks]]\nname = "signed"\nurl = "http://u:pw@127.0.0.1:9/hooks?token=t0k"\n'
        'secret_env = "LINE_SINK_SECRET"\n\n'
        '[[events.sinks]]\nname = "plain"\nurl = "http://127.0.0.1:9/plain"\nsigning = "none"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCH_")}
    env.update(
        ORCH_SERVER__LISTEN=f"127.0.0.1:{api}",
        WORKSPACE_API_BASE_URL=f"http://127.0.0.1:{sim}",
        LINE_SINK_SECRET=SECRET,
    )
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "orchestrator", "serve", "--config", str(cfg)),
                *("--with-simulator", "--simulator-state", str(tmp_path / "sim.json")),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tmp_path,
        )
    try:
        await _ready(f"http://127.0.0.1:{api}", proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    text = log.read_text()
    records = [orjson.loads(line) for line in text.splitlines() if line.startswith("{")]
    infos = [r for r in records if r["level"] == "info"]
    lines = [r for r in infos if r["msg"].startswith("listening on ")]
    assert len(lines) == 1, infos
    msg = lines[0]["msg"]
    for part in (
        f"listening on http://127.0.0.1:{api}",
        f"workspaces: default http://127.0.0.1:{sim}",
        "signed http://127.0.0.1:9/hooks (signed)",
        "plain http://127.0.0.1:9/plain (UNSIGNED)",
        f"store: SQLite {tmp_path / 'orch.db'}",
        f"simulator: http://127.0.0.1:{sim}",
    ):
        assert part in msg, (part, msg)
    assert lines[0]["sinks"][1] == {
        "name": "plain",
        "url": "http://127.0.0.1:9/plain",
        "signed": False,
    }
    # The list-filter notes are DEBUG now: nothing was refused that anyone asked for.
    assert not [r for r in infos if "filter" in r["msg"]], infos
    for secret in (SECRET, "pw", "t0k"):
        assert secret not in msg


def test_a_postgresql_store_is_shown_without_any_password(tmp_path: Path) -> None:
    settings = load_settings(None, store={"url": "postgresql://orch@db.internal:5432/orch"})
    assert store_description(settings) == "PostgreSQL postgresql://orch@db.internal:5432/orch"
    sneaky = load_settings(None, store={"url": "postgresql://orch@db:5432/orch?password=hunter2"})
    assert "hunter2" not in store_description(sneaky)
