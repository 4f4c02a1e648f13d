"""The status-read front: it answers plain status reads itself, byte-identical to
aiohttp's route, and relays everything else in order (the rest of the simulator's
tests run behind it too, through the ``sim`` fixture)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator

import aiohttp
import pytest

from orchestrator.simulator import RunningSimulator, start_simulator
from tests.simulator.conftest import JOBS, NET, call


@pytest.fixture
async def fronted() -> AsyncIterator[RunningSimulator]:
    async with await start_simulator(profile="fast", seed=11, front=True) as running:
        yield running


async def _raw(
    port: int, payload: bytes, responses: int
) -> list[tuple[bytes, dict[str, str], bytes]]:
    """Send ``payload`` in one write on one connection; read ``responses`` answers."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(payload)
        out = []
        for _ in range(responses):
            status = (await reader.readline()).rstrip(b"\r\n")
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers["content-length"]))
            out.append((status, headers, body))
        return out
    finally:
        writer.close()


async def test_front_answers_status_reads_like_aiohttp(fronted: RunningSimulator) -> None:
    async with aiohttp.ClientSession(base_url=fronted.url) as client:
        _, job = await call(client, "POST", "/api/workspace/functions/demo.hello/enqueue", {})
        job_id = job["Data"]["JobId"]
        _, build = await call(client, "POST", NET, {"Kind": "Build"})
        build_id = build["Id"]
    # A new session: the first's connection went to aiohttp with the POSTs, for good.
    async with aiohttp.ClientSession(base_url=fronted.url) as client:
        before = fronted.front_answered
        assert before is not None
        for path in (f"{JOBS}/{job_id}", f"{NET}/{build_id}"):
            async with client.get(path) as r:
                kept_alive = (
                    r.status,
                    r.headers["Content-Type"],
                    r.headers["Server"],
                    await r.read(),
                )
            # "Connection: close" is not a plain read: aiohttp itself answers it.
            async with client.get(path, headers={"Connection": "close"}) as r:
                relayed = (r.status, r.headers["Content-Type"], r.headers["Server"], await r.read())
            assert kept_alive == relayed
            assert kept_alive[0] == 200
        assert fronted.front_answered == before + 2
        # The front's reads are counted like aiohttp's.
        _, stats = await call(client, "GET", "/_sim/stats")
        assert stats["routes"]["job_status"]["200"] == 2
        assert stats["routes"]["build_status"]["200"] == 2


async def test_fault_rules_send_status_reads_to_aiohttp(fronted: RunningSimulator) -> None:
    async with aiohttp.ClientSession(base_url=fronted.url) as client:
        _, job = await call(client, "POST", "/api/workspace/functions/demo.hello/enqueue", {})
        job_id = job["Data"]["JobId"]
        rule = {"route": "job_status", "fault": "rate_limited", "retry_after_s": 2, "max_hits": 1}
        assert (await call(client, "PUT", "/_sim/faults", {"rules": [rule]}))[0] == 200
        before = fronted.front_answered
        async with client.get(f"{JOBS}/{job_id}") as r:
            assert r.status == 429 and r.headers["Retry-After"] == "2"
        assert fronted.front_answered == before
        assert (await call(client, "PUT", "/_sim/faults", {"rules": []}))[0] == 200
        # A new connection (the old one is relayed for good) is the front's again.
    async with aiohttp.ClientSession(base_url=fronted.url) as client:
        async with client.get(f"{JOBS}/{job_id}") as r:
            assert r.status == 200
        assert fronted.front_answered == before + 1


async def test_pipelined_requests_are_answered_in_order(fronted: RunningSimulator) -> None:
    async with aiohttp.ClientSession(base_url=fronted.url) as client:
        _, job = await call(client, "POST", "/api/workspace/functions/demo.hello/enqueue", {})
    job_id = job["Data"]["JobId"].encode()
    body = b'{"count": 3}'
    payload = (
        b"GET " + JOBS.encode() + b"/" + job_id + b" HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET " + JOBS.encode() + b"/no-such-job HTTP/1.1\r\nHost: x\r\n\r\n"
        b"POST /_sim/jobs/bulk HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        + b"GET " + JOBS.encode() + b"/" + job_id + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    )  # fmt: skip
    answers = await _raw(fronted.port, payload, 4)
    assert [status for status, _, _ in answers] == [
        b"HTTP/1.1 200 OK",
        b"HTTP/1.1 404 Not Found",
        b"HTTP/1.1 201 Created",
        b"HTTP/1.1 200 OK",
    ]
    assert answers[0][2] == answers[3][2] and job_id in answers[0][2]
    assert answers[1][1]["content-type"].startswith("application/problem+json")
    assert len(answers[2][2]) > 20  # three new ids


async def test_a_reset_fault_resets_through_the_relay(fronted: RunningSimulator) -> None:
    async with aiohttp.ClientSession(base_url=fronted.url) as client:
        _, job = await call(client, "POST", "/api/workspace/functions/demo.hello/enqueue", {})
        rule = {"route": "job_status", "fault": "reset", "max_hits": 2}
        assert (await call(client, "PUT", "/_sim/faults", {"rules": [rule]}))[0] == 200
        with pytest.raises(aiohttp.ClientConnectionError):
            # aiohttp retries a reset GET once on a kept-alive connection: two hits.
            async with client.get(f"{JOBS}/{job['Data']['JobId']}") as r:
                await r.read()


async def test_large_bodies_cross_the_relay_both_ways(fronted: RunningSimulator) -> None:
    async with aiohttp.ClientSession(base_url=fronted.url) as client:
        status, created = await call(client, "POST", "/_sim/jobs/bulk", {"count": 20_000})
        assert status == 201 and len(set(created["ids"])) == 20_000
        # A request body far larger than a socket buffer, under aiohttp's 1 MiB cap:
        # read whole and refused by name.
        junk = io.BytesIO(b'{"padding": "' + b"x" * 900_000 + b'"}')
        headers = {"Content-Type": "application/json"}
        async with client.post("/_sim/jobs/bulk", data=junk, headers=headers) as r:
            assert r.status == 400 and "count" in await r.text()


async def test_closing_closes_open_connections() -> None:
    sim = await start_simulator(profile="fast", seed=1, front=True)
    reader, writer = await asyncio.open_connection("127.0.0.1", sim.port)
    try:
        await asyncio.wait_for(sim.close(), 10)
        assert await asyncio.wait_for(reader.read(), 10) == b""
    finally:
        writer.close()


async def test_the_request_log_names_the_replica_on_both_paths(fronted: RunningSimulator) -> None:
    """The front and the aiohttp route both log ``X-Orchestrator-Replica``; a request
    without it is logged with no replica."""
    async with aiohttp.ClientSession(base_url=fronted.url) as client:
        _, job = await call(client, "POST", "/api/workspace/functions/demo.hello/enqueue", {})
    job_id = job["Data"]["JobId"]
    before = fronted.front_answered
    assert before is not None
    async with aiohttp.ClientSession(base_url=fronted.url) as client:  # the front
        async with client.get(f"{JOBS}/{job_id}", headers={"X-Orchestrator-Replica": "r1"}) as r:
            assert r.status == 200
        async with client.get(f"{JOBS}/{job_id}") as r:
            assert r.status == 200
    assert fronted.front_answered == before + 2
    async with aiohttp.ClientSession(base_url=fronted.url) as client:  # relayed to aiohttp
        async with client.post(f"{JOBS}/{job_id}/cancel", headers={"x-orchestrator-replica": "r2"}):
            pass
        async with client.get(f"{JOBS}/{job_id}", headers={"X-Orchestrator-Replica": "r2"}) as r:
            assert r.status == 200
    assert fronted.front_answered == before + 2
    logged = fronted.state.log.requests(job_id)[-4:]
    assert [r["replica"] for r in logged] == ["r1", None, "r2", "r2"]
    assert [r["route"] for r in logged][:2] == ["job_status", "job_status"]
    assert logged[3]["route"] == "job_status"
