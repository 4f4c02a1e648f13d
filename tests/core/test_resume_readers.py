"""``polling.resume_readers``: a restart's first reads made by child processes.

A real ``orchestrator serve`` process resumes its trackings with two reader
processes; what must hold is seen from outside: every resumed tracking is read
and judged as the loop would have judged it, the children exist only until the
resume is read, and a child that dies costs a retry, never a tracking.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from orchestrator.simulator import RunningSimulator, start_simulator
from tests.core.test_restart import _script, write_config
from tests.serveproc import ServeProcess, free_port

CHILD = b"orchestrator.engine.reader_process"


def reader_children(pid: int) -> list[int]:
    """Pids of the reader processes whose parent is ``pid``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        if parent == pid and CHILD in cmdline:
            found.append(int(name))
    return found


async def gone(serve: ServeProcess) -> None:
    assert serve.proc is not None
    async with asyncio.timeout(15):
        while reader_children(serve.proc.pid):
            await asyncio.sleep(0.05)


def log_records(serve: ServeProcess, msg: str) -> list[dict[str, Any]]:
    records = []
    for line in serve.log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            record = orjson.loads(line)
            if record.get("msg") == msg:
                records.append(record)
    return records


async def metric(session: aiohttp.ClientSession, base: str, prefix: str, label: str = "") -> float:
    """The sum of a family's samples, of those with ``label`` if given."""
    async with session.get(f"{base}/metrics") as resp:
        text = await resp.text()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(prefix) and label in line
    )


async def queued_jobs(session: aiohttp.ClientSession, sim: RunningSimulator, n: int) -> list[str]:
    """Jobs that stay Queued all test long."""
    profile = {"job": {"pickup_s": 86_400, "duration_s": 1}}
    async with session.put(f"{sim.url}/_sim/profile", json=profile) as resp:
        assert resp.status == 200
    async with session.post(f"{sim.url}/_sim/jobs/bulk", json={"count": n}) as resp:
        return list((await resp.json())["ids"])


async def track(session: aiohttp.ClientSession, base: str, ids: list[str]) -> None:
    items = [{"kind": "function_job", "remote_id": rid, "timeout_s": 600} for rid in ids]
    async with session.post(f"{base}/v1/trackings/batch", json={"items": items}) as resp:
        assert resp.status == 200
        assert all(i["status"] == 201 for i in (await resp.json())["items"])


async def resume_read(session: aiohttp.ClientSession, base: str) -> None:
    async with asyncio.timeout(30):
        while await metric(session, base, "orchestrator_resume_pending{") > 0:
            await asyncio.sleep(0.05)


async def outcomes(session: aiohttp.ClientSession, base: str, ids: list[str]) -> dict[str, str]:
    async with asyncio.timeout(30):
        while True:
            found = {}
            cursor = None
            while True:
                url = f"{base}/v1/trackings?state=terminal&limit=200"
                async with session.get(url + (f"&cursor={cursor}" if cursor else "")) as resp:
                    page = await resp.json()
                found.update({t["remote_id"]: t["outcome"] for t in page["items"]})
                cursor = page["next_cursor"]
                if not cursor:
                    break
            if set(ids) <= set(found):
                return {rid: found[rid] for rid in ids}
            await asyncio.sleep(0.1)


@asynccontextmanager
async def two_readers(
    tmp_path: Path, seed: int, rate: float
) -> AsyncIterator[tuple[RunningSimulator, ServeProcess, aiohttp.ClientSession]]:
    """The simulator and a service with two reader processes (not started yet)."""
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=seed)
    port = free_port()
    cfg = write_config(tmp_path, sim.url, port, resume_readers=2)
    cfg.write_text(cfg.read_text() + f"max_requests_per_second = {rate}\n")
    serve = ServeProcess(cfg, port, tmp_path / "serve.log")
    try:
        async with aiohttp.ClientSession() as session:
            yield sim, serve, session
    finally:
        serve.ensure_dead()
        await sim.close()


async def test_readers_make_the_resume_reads_then_exit(tmp_path: Path) -> None:
    # 180 resumed trackings at 100 reads/s: a resume of about two seconds.
    async with two_readers(tmp_path, 11, 100) as (sim, serve, session):
        base = serve.url
        queued = await queued_jobs(session, sim, 150)
        # These end while the service is down: their first read after the
        # restart, made by a child, must finish them as the loop would.
        ends = ["Completed", "Failed", "Cancelled"] * 10
        ending = [await _script(session, sim.url, "function_job", e, 600.0) for e in ends]
        await serve.start(session)
        await track(session, base, queued + ending)
        await gone(serve)  # nothing was resumed: the children were closed at once
        assert serve.terminate() == 0
        restarted_at = sim.state.clock()
        # Ten minutes pass for Moltaro while the service is down (not waited
        # for: the simulator's clock jumps), and the scripted jobs end.
        real_clock = sim.state.clock
        sim.state.clock = lambda: real_clock() + 600.0

        await serve.start(session)
        assert serve.proc is not None
        assert len(reader_children(serve.proc.pid)) == 2
        await resume_read(session, base)
        await gone(serve)

        expected = {"Completed": "succeeded", "Failed": "failed", "Cancelled": "cancelled"}
        assert await outcomes(session, base, ending) == {
            rid: expected[end] for rid, end in zip(ending, ends, strict=True)
        }
        # Every resumed tracking was read after the restart, each read was
        # handed to a child, and the queued ones stay active.
        for rid in queued + ending:
            log = sim.state.log.requests(rid)
            assert any(r["t"] >= restarted_at and r["status"] == 200 for r in log), rid
        closed = log_records(serve, "reader processes closed")
        # (the first process had nothing to resume: none handed over)
        assert [(r["readers"], r["reads"]) for r in closed] == [(2, 0), (2, 180)]
        async with session.get(f"{base}/v1/trackings?state=active&limit=200") as resp:
            assert {t["remote_id"] for t in (await resp.json())["items"]} == set(queued)
        assert serve.terminate() == 0


async def test_a_reader_that_dies_costs_a_retry_not_a_tracking(tmp_path: Path) -> None:
    async with two_readers(tmp_path, 12, 1000) as (sim, serve, session):
        base = serve.url
        queued = await queued_jobs(session, sim, 60)
        ending = [await _script(session, sim.url, "function_job", "Completed", 4.0)]
        ending += [await _script(session, sim.url, "function_job", "Failed", 4.0)]
        await serve.start(session)
        await track(session, base, queued + ending)
        assert serve.terminate() == 0

        # Every status read now takes a second: a child is sure to hold
        # some when it is killed.
        rules = {"rules": [{"route": "job_status", "fault": "latency", "latency_s": 1.0}]}
        async with session.put(f"{sim.url}/_sim/faults", json=rules) as resp:
            assert resp.status == 200
        await serve.start(session)
        assert serve.proc is not None
        children = reader_children(serve.proc.pid)
        assert len(children) == 2
        await asyncio.sleep(0.5)
        os.kill(children[0], signal.SIGKILL)

        async with asyncio.timeout(10):
            while not (lost := log_records(serve, "reader process ended with reads in flight")):
                await asyncio.sleep(0.05)
        assert len(lost) == 1 and lost[0]["reads"] >= 1
        await resume_read(session, base)
        connection = await metric(session, base, "orchestrator_polls_total{", 'result="connection"')
        assert connection == lost[0]["reads"]
        async with session.put(f"{sim.url}/_sim/faults", json={"rules": []}) as resp:
            assert resp.status == 200
        # The reads the child took down with it are made again, and the
        # trackings end as their jobs did, each with one terminal event.
        assert await outcomes(session, base, ending) == {
            ending[0]: "succeeded",
            ending[1]: "failed",
        }
        async with session.get(f"{base}/v1/events?after=0&limit=1000") as resp:
            events = (await resp.json())["events"]
        terminal = Counter(e["subject"] for e in events if not e["type"].endswith("status_changed"))
        assert len(terminal) == 2 and set(terminal.values()) == {1}
        await gone(serve)
        assert serve.terminate() == 0
