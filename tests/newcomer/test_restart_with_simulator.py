"""``serve --with-simulator`` restarted mid-run: the simulator keeps its work, so every
tracking ends with its real outcome (not ``not_found``)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.newcomer.conftest import clean_env, free_port, wait_http


def start(cfg: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "serve", "--config", str(cfg),
             "--with-simulator", "--profile", "fast"],
            stdout=out, stderr=subprocess.STDOUT, env=clean_env(),
        )  # fmt: skip


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
async def test_a_restart_keeps_the_simulated_work(tmp_path: Path, how: signal.Signals) -> None:
    port, sim_port = free_port(), free_port()
    cfg = tmp_path / "orchestrator.toml"
    cfg.write_text(
        f'[server]\nlisten = "127.0.0.1:{port}"\nshutdown_grace_s = 1\n'
        f'[store]\npath = "{tmp_path / "data" / "orch.db"}"\n'
        "[polling]\ninitial_delay_s = 0.2\nmax_delay_s = 0.5\n"
        '[logging]\nformat = "json"\nlevel = "WARNING"\n'
        f'[[workspaces]]\nname = "default"\nbase_url = "http://127.0.0.1:{sim_port}"\n'
    )
    api, sim = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{sim_port}"
    log = tmp_path / "serve.log"
    proc = start(cfg, log)
    try:
        wait_http(f"{api}/readyz", proc, log)
        async with aiohttp.ClientSession() as http:
            # Long enough to outlive the restart; every run succeeds.
            job = {"pickup_s": 2.0, "duration_s": 2.0, "sequence": ["success"]}
            async with http.put(f"{sim}/_sim/profile", json={"job": job}) as resp:
                assert resp.status == 200, await resp.text()
            ids: list[str] = []
            for _ in range(4):
                url = f"{sim}/api/workspace/functions/billing.sync-invoices/enqueue"
                async with http.post(url, json={}) as resp:
                    answer = await resp.json()
                body = {"kind": "function_job", "enqueue_response": answer}
                async with http.post(f"{api}/v1/trackings", json=body) as resp:
                    assert resp.status == 201, await resp.text()
                    ids.append((await resp.json())["tracking_id"])
            proc.send_signal(how)
            proc.wait(20)
            proc = start(cfg, log)
            wait_http(f"{api}/readyz", proc, log)
            finals: dict[str, Any] = {}
            deadline = 60
            for _ in range(deadline * 10):
                for tid in ids:
                    async with http.get(f"{api}/v1/trackings/{tid}") as resp:
                        t = await resp.json()
                    if t["state"] == "terminal":
                        finals[tid] = t
                if len(finals) == len(ids):
                    break
                await asyncio.sleep(0.1)
        assert {t["outcome"] for t in finals.values()} == {"succeeded"}, finals
        assert (tmp_path / "data" / "orch.db.simulator").exists()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
