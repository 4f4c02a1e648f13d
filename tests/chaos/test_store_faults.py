"""The service's own store in trouble: a really full filesystem, and a file locked by another process."""

from __future__ import annotations

import asyncio
import fcntl
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from orchestrator.simulator import start_simulator
from tests.chaos.harness import (
    EXPECTED,
    Client,
    Secrets,
    script,
    write_config,
)
from tests.serveproc import ServeProcess, free_port
from tests.smallfs import fill as fill_up
from tests.smallfs import small_tmpfs


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "fs", "2m") as mount_point:
        yield mount_point


def fill(directory: Path) -> Path:
    return fill_up(directory, 16 * 1024 * 1024)


async def test_full_disk_refuses_intake_keeps_polling_state_and_resumes(
    tmp_path: Path, small_fs: Path
) -> None:
    secrets = Secrets()
    async with await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=9) as sim:
        port = free_port()
        cfg = write_config(tmp_path, port=port, sim_url=sim.url, store_path=small_fs / "orch.db")
        serve = ServeProcess(cfg, port, tmp_path / "serve.log", secrets.env())
        async with aiohttp.ClientSession() as session:
            client = Client(session, serve.url, secrets.api_token)
            try:
                await serve.start(session)
                truth: dict[str, str] = {}
                acknowledged: set[str] = set()

                async def track(rid: str) -> tuple[int, dict[str, object]]:
                    status, body = await client.post(
                        "/v1/trackings",
                        {"kind": "function_job", "remote_id": rid, "timeout_s": 90},
                    )
                    if status in (200, 201):
                        acknowledged.add(str(body["tracking_id"]))
                    return status, body

                ends = ["Completed", "Failed", "Cancelled"] * 4
                for end in ends:  # these end while the disk is full
                    rid = await script(session, sim.url, "function_job", end, 3.0)
                    truth[rid] = EXPECTED[end]
                    assert (await track(rid))[0] == 201
                await asyncio.sleep(0.5)  # a few polls recorded

                filler = fill(small_fs)
                refused = None
                for _ in range(200):  # until the store refuses (the WAL may hold a little)
                    rid = await script(session, sim.url, "function_job", "Completed", 0.5)
                    status, body = await track(rid)
                    if status == 201:
                        truth[rid] = "succeeded"
                        continue
                    refused = (rid, status, body)
                    break
                assert refused is not None, "the full store never refused intake"
                rid, status, body = refused
                assert status == 503, body
                assert body["title"] and body["status"] == 503
                async with session.get(serve.url + "/readyz") as resp:
                    assert resp.status == 503
                # Reads still answer, and nothing refused became a tracking.
                listed = {t["remote_id"]: t for t in await client.trackings()}
                assert rid not in listed
                assert set(listed) == set(truth)

                await asyncio.sleep(4)  # the first twelve end remotely meanwhile
                for t in await client.trackings():
                    # Whatever could not be stored stays active; nothing is misreported.
                    assert t["outcome"] in (None, truth[t["remote_id"]])
                assert serve.proc is not None and serve.proc.poll() is None

                filler.unlink()  # space returns
                async with asyncio.timeout(30):
                    while True:
                        async with session.get(serve.url + "/readyz") as resp:
                            if resp.status == 200:
                                break
                        await asyncio.sleep(0.2)
                truth[rid] = "succeeded"
                assert (await track(rid))[0] == 201
                async with asyncio.timeout(40):
                    while await client.active_count():
                        await asyncio.sleep(0.2)

                # A crash now loses nothing that was acknowledged.
                serve.kill()
                await serve.start(session)
                final = {t["remote_id"]: t for t in await client.trackings()}
                assert {r: t["outcome"] for r, t in final.items()} == truth
                assert {t["tracking_id"] for t in final.values()} == acknowledged
                terminal = Counter(
                    e["subject"]
                    for e in await client.events()
                    if not e["type"].endswith("status_changed")
                )
                assert set(terminal) == acknowledged
                assert set(terminal.values()) == {1}
                assert serve.terminate() == 0, serve.tail()
            finally:
                serve.ensure_dead()


def test_locked_store_stops_start_up_with_one_clear_line(tmp_path: Path) -> None:
    store = tmp_path / "orch.db"
    cfg = write_config(tmp_path, port=free_port(), sim_url="http://127.0.0.1:9", store_path=store)
    fd = os.open(str(store) + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running instance holds it
        env = {k: v for k, v in os.environ.items() if not k.startswith("ORCH_")}
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator", "serve", "--config", str(cfg)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
    finally:
        os.close(fd)
    assert done.returncode == 3, done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "in use by another process" in lines[0]
    assert str(store) in lines[0]
