"""A rolling upgrade: rows an old replica inserts carry no ``deadline_source``.

The build before PostgreSQL migration 002 wrote trackings without the column
(NULL). A replica of this build that claims such rows judges them by intake's
rule from what they kept: a deadline exactly ``polling.default_deadline_s``
after intake was the default one, and the job's own replaces it once a read
shows it; any other deadline was the caller's and is kept.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg  # type: ignore[import-untyped]
import pytest

from orchestrator.simulator import start_simulator
from tests.integration.test_replicas import write_config
from tests.serveproc import ServeProcess, free_port

pytestmark = pytest.mark.slow

DEFAULT_DEADLINE_S = 3600  # polling.default_deadline_s, unset in write_config
DEFAULT_ID, CALLER_ID = "trk_" + "0" * 23 + "1", "trk_" + "0" * 23 + "2"
# The 001-era statement, less its lease (the row is unleased, so claimable at once).
OLD_BUILD_INSERT = (
    "INSERT INTO trackings (tracking_id, workspace, kind, remote_id, state, polls,"
    " next_poll_at, deadline_at, created_at, labels, notify)"
    " VALUES ($1, 'default', 'function_job', $2, 'active', 0, $3, $4, $3, '\\x7b7d', 'terminal')"
)


def _unix(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


async def test_rows_an_old_build_inserted_follow_intakes_rule(
    tmp_path: Path, postgres_dsn: str
) -> None:
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=31)
    port = free_port()
    cfg = write_config(tmp_path / "new.toml", sim.url, port, "new")
    replica = ServeProcess(cfg, port, tmp_path / "new.log", {"ORCH_STORE__URL": postgres_dsn})
    http = aiohttp.ClientSession()

    async def final(tracking_id: str) -> Any:
        async with asyncio.timeout(60):
            while True:
                async with http.get(f"{replica.url}/v1/trackings/{tracking_id}") as resp:
                    assert resp.status in (200, 404), await resp.text()
                    t = await resp.json() if resp.status == 200 else {}
                if t.get("state") == "terminal":
                    return t
                await asyncio.sleep(0.2)

    try:
        await replica.start(http)  # migrated: the column exists, NULL on these rows
        rids = []
        for _ in range(2):
            steps = [
                {"after_s": 0, "status": "Queued"},
                {"after_s": 0.2, "status": "Leased"},
                {"after_s": 3, "status": "Completed"},
            ]
            script = {"kind": "function_job", "steps": steps, "timeout_seconds": 10}
            script.update(max_attempts=1, retry_delay_s=0)
            async with http.post(f"{sim.url}/_sim/script", json=script) as resp:
                assert resp.status == 201
                rids.append(str((await resp.json())["id"]))
        now = time.time()
        conn = await asyncpg.connect(postgres_dsn)
        try:
            await conn.execute(OLD_BUILD_INSERT, DEFAULT_ID, rids[0], now, now + DEFAULT_DEADLINE_S)
            await conn.execute(OLD_BUILD_INSERT, CALLER_ID, rids[1], now, now + 900)
        finally:
            await conn.close()
        default, caller = await final(DEFAULT_ID), await final(CALLER_ID)
        assert (default["outcome"], caller["outcome"]) == ("succeeded", "succeeded")
        # 10 s x 1 attempt + the 60 s margin: the job's own, as intake's default would.
        assert default["deadline_source"] == "derived"
        assert abs(_unix(default["deadline_at"]) - (now + 10 + 60)) < 0.01
        # The caller's deadline stands, and its source stays unknown.
        assert caller["deadline_source"] is None
        assert abs(_unix(caller["deadline_at"]) - (now + 900)) < 0.01
    finally:
        replica.ensure_dead()
        await http.close()
        await sim.close()
