"""A reader process's reads judge every answer as the loop's own reads do.

The loop reads with aiohttp (``WorkspaceClient``); reader processes read with
``lean_http`` (``WorkspaceReads``). One scripted HTTP server on 127.0.0.1
answers both with the same bytes, framed every way HTTP/1.1 allows and failing
every way a connection can; the two classified results must be equal, error
messages included (durations aside).
"""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import aiohttp
import pytest

from orchestrator.config import WorkspaceConfig
from orchestrator.engine.reader_process import WorkspaceReads
from orchestrator.engine.readers import client_setup
from orchestrator.engine.readresult import ReadResult
from orchestrator.engine.workspace import WorkspaceClient
from tests.serveproc import free_port

BODY = b'{"JobId":"job-1","Status":1,"Run":null}'


def head(status: str, *headers: str) -> bytes:
    return ("\r\n".join([f"HTTP/1.1 {status}", *headers, "", ""])).encode()


def chunked(data: bytes, size: int = 7) -> bytes:
    parts = [data[i : i + size] for i in range(0, len(data), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


# id -> the answer's bytes and what the server does after writing them:
# "keep" (wait for the next request), "close", or "hang" (never answer).
SCRIPTS: dict[str, tuple[bytes, str]] = {
    "plain": (head("200 OK", f"Content-Length: {len(BODY)}") + BODY, "keep"),
    "split": (head("200 OK", f"Content-Length: {len(BODY)}") + BODY, "keep"),
    "chunked": (head("200 OK", "Transfer-Encoding: chunked") + chunked(BODY), "keep"),
    "until-close": (head("200 OK", "Content-Type: application/json") + BODY, "close"),
    "close-header": (
        head("200 OK", f"Content-Length: {len(BODY)}", "Connection: close") + BODY,
        "close",
    ),
    "gzip": (
        head("200 OK", f"Content-Length: {len(gzip.compress(BODY))}", "Content-Encoding: gzip")
        + gzip.compress(BODY),
        "keep",
    ),
    "deflate": (
        head("200 OK", f"Content-Length: {len(zlib.compress(BODY))}", "Content-Encoding: deflate")
        + zlib.compress(BODY),
        "keep",
    ),
    "not-json": (head("200 OK", "Content-Length: 5") + b"hello", "keep"),
    "missing": (head("404 Not Found", "Content-Length: 0"), "keep"),
    "limited": (head("429 Too Many Requests", "Retry-After: 7", "Content-Length: 0"), "keep"),
    "down": (
        head("503 Service Unavailable", "Retry-After: Wed, 21 Oct 2099 07:28:00 GMT") + b"",
        "close",
    ),
    "bad-date": (head("503 Service Unavailable", "Retry-After: soon", "Content-Length: 0"), "keep"),
    "forbidden": (head("403 Forbidden", "Content-Length: 2") + b"no", "keep"),
    "conflict": (head("409 Conflict", f"Content-Length: {len(BODY)}") + BODY, "keep"),
    "teapot": (head("418 I'm a teapot", "Content-Length: 0"), "keep"),
    "continue": (
        head("100 Continue") + head("200 OK", f"Content-Length: {len(BODY)}") + BODY,
        "keep",
    ),
    "no-content": (head("204 No Content"), "keep"),
    "cut-head": (b"HTTP/1.1 200 OK\r\nContent-Le", "close"),
    "cut-body": (head("200 OK", f"Content-Length: {len(BODY)}") + BODY[:10], "close"),
    "garbage": (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "close"),
    "silent": (b"", "close"),
    "slow": (b"", "hang"),
    # Answered as the first request of a connection; a later one closes it unanswered.
    "once": (head("200 OK", f"Content-Length: {len(BODY)}") + BODY, "keep"),
    # Answered, then the start of an answer nobody asked for, on a connection kept open.
    "parting": (head("200 OK", f"Content-Length: {len(BODY)}") + BODY + b"HTTP/1.1 408", "keep"),
}


class ScriptedServer:
    """Answers ``GET /jobs/<id>`` with ``SCRIPTS[id]``; counts connections."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.add(writer)
        served = 0
        try:
            while True:
                try:
                    raw = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                line, *rest = raw.decode().split("\r\n")
                path = line.split(" ")[1]
                headers = {
                    k.lower(): v.strip() for k, _, v in (h.partition(":") for h in rest if h)
                }
                self.requests.append((path, headers))
                answer, then = SCRIPTS[path.rsplit("/", 1)[1]]
                served += 1
                if path.endswith("/once") and served > 1:
                    return
                if then == "hang":
                    await asyncio.sleep(30)
                    return
                if path.endswith("/split"):
                    # One byte at a time: the parser sees every boundary.
                    for i in range(len(answer)):
                        writer.write(answer[i : i + 1])
                        await writer.drain()
                else:
                    writer.write(answer)
                    await writer.drain()
                if then == "close":
                    return
        finally:
            self.writers.discard(writer)
            writer.close()

    async def __aenter__(self) -> str:
        port = free_port()
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", port)
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for writer in list(self.writers):  # the "slow" handlers sleep on open connections
            writer.close()
        await self.server.wait_closed()


def config(base_url: str, timeout_s: float = 2.0) -> WorkspaceConfig:
    return WorkspaceConfig(
        name="w",
        base_url=base_url,
        request_timeout_s=timeout_s,
        max_in_flight=4,
        paths={"function_job": "/prefix-free/jobs/{id}"},
    )


@pytest.fixture
async def both() -> AsyncIterator[Callable[..., Any]]:
    """(loop client, child reads) for a workspace at a base URL, closed afterwards."""
    sessions: list[aiohttp.ClientSession] = []
    reads: list[WorkspaceReads] = []

    def make(cfg: WorkspaceConfig, token: str | None = None) -> tuple[Any, WorkspaceReads]:
        session = aiohttp.ClientSession(trust_env=False)
        sessions.append(session)
        loop_client = WorkspaceClient(cfg, session, token)
        (setup,) = client_setup({cfg.name: loop_client})
        child = WorkspaceReads(setup)
        reads.append(child)
        return loop_client, child

    yield make
    for child in reads:
        child.client.close()
    for session in sessions:
        await session.close()


def assert_same(by_child: ReadResult, by_loop: ReadResult) -> None:
    """Equal but for the duration (a stopwatch, not a judgement) and Retry-After
    within a second (an HTTP date counts from the moment of reading)."""
    assert replace(by_child, duration=0.0, retry_after=None) == replace(
        by_loop, duration=0.0, retry_after=None
    )
    assert (by_child.retry_after is None) == (by_loop.retry_after is None)
    if by_child.retry_after is not None and by_loop.retry_after is not None:
        assert abs(by_child.retry_after - by_loop.retry_after) < 1.0


@pytest.mark.parametrize("script", sorted(set(SCRIPTS) - {"slow", "once", "parting"}))
async def test_each_answer_is_judged_the_same(both: Callable[..., Any], script: str) -> None:
    async with ScriptedServer() as url:
        loop_client, child = both(config(url))
        for seen in (None, b"0" * 16):
            by_loop = await loop_client.read("function_job", script, seen)
            by_child = await child.read("function_job", script, seen)
            assert_same(by_child, by_loop)
        # And a body the caller has seen comes back unchanged, unparsed, from both.
        if by_loop.digest is not None:
            again = await child.read("function_job", script, by_loop.digest)
            assert again.unchanged and again.body is None
            assert_same(again, await loop_client.read("function_job", script, again.digest))


async def test_results_are_the_documented_classes(both: Callable[..., Any]) -> None:
    """Not only equal: right. (Equal and wrong would pass the test above.)"""
    async with ScriptedServer() as url:
        _, child = both(config(url))
        got = {
            s: await child.read("function_job", s, None)
            for s in sorted(set(SCRIPTS) - {"slow", "once", "parting"})
        }
    for s in (
        "plain",
        "split",
        "chunked",
        "until-close",
        "close-header",
        "gzip",
        "deflate",
        "continue",
    ):
        assert (got[s].result, got[s].http_status, got[s].body) == (
            "ok",
            200,
            {"JobId": "job-1", "Status": 1, "Run": None},
        ), s
    assert got["not-json"].result == "invalid_response"
    assert got["missing"].result == "not_found"
    assert (got["limited"].result, got["limited"].retry_after) == ("rate_limited", 7.0)
    assert got["down"].result == "http_5xx"
    assert got["down"].retry_after is not None and got["down"].retry_after > 86_400
    assert (got["bad-date"].result, got["bad-date"].retry_after) == ("http_5xx", None)
    assert got["forbidden"].result == "unauthorized"
    assert got["conflict"].body == {"JobId": "job-1", "Status": 1, "Run": None}
    assert got["teapot"].result == "invalid_response"
    assert got["no-content"].result == "invalid_response"
    for s in ("cut-head", "cut-body", "garbage", "silent"):
        assert got[s].result == "connection", s
        assert got[s].http_status is None


async def test_keep_alive_headers_and_timeout(both: Callable[..., Any]) -> None:
    server = ScriptedServer()
    async with server as url:
        _, child = both(config(url, timeout_s=0.3), token="s3cret")
        for _ in range(20):
            assert (await child.read("function_job", "plain", None)).result == "ok"
        # Twenty sequential reads, one connection.
        assert server.connections == 1
        path, headers = server.requests[0]
        assert path == "/prefix-free/jobs/plain"
        assert headers["authorization"] == "Bearer s3cret"
        assert headers["accept"] == "application/json"
        assert headers["host"] == url.removeprefix("http://")
        # An answer that ends with a close is not reused.
        await child.read("function_job", "close-header", None)
        await child.read("function_job", "plain", None)
        assert server.connections == 2
        slow = await child.read("function_job", "slow", None)
        assert (slow.result, slow.error) == (
            "timeout",
            {"kind": "timeout", "message": "no answer in 0.3s"},
        )
        # The timed-out connection is dropped, not handed to the next read.
        assert (await child.read("function_job", "plain", None)).result == "ok"


async def test_a_kept_connection_closed_by_the_server_is_retried_once(
    both: Callable[..., Any],
) -> None:
    """A kept connection that the server closes instead of answering costs nothing:
    the read goes out again on a new one (aiohttp does the same for idempotent
    requests). Closing before any byte of an answer is what an idle timeout on
    the server's side looks like when it races the next request."""
    server = ScriptedServer()
    async with server as url:
        loop_client, child = both(config(url))
        for client in (loop_client, child):
            server.connections = 0
            assert (await client.read("function_job", "once", None)).result == "ok"
            assert (await client.read("function_job", "once", None)).result == "ok"
            assert server.connections == 2


async def test_bytes_nobody_asked_for_retire_the_connection(both: Callable[..., Any]) -> None:
    """Half an answer arriving on an idle connection (a server's parting 408)
    must not be taken for the next read's answer."""
    server = ScriptedServer()
    async with server as url:
        _, child = both(config(url))
        assert (await child.read("function_job", "parting", None)).result == "ok"
        await asyncio.sleep(0.05)  # the stray bytes arrive while the connection is idle
        again = await child.read("function_job", "plain", None)
        assert (again.result, again.http_status) == ("ok", 200)
        assert server.connections == 2


async def test_a_refused_connection_is_transport_trouble(both: Callable[..., Any]) -> None:
    loop_client, child = both(config(f"http://127.0.0.1:{free_port()}"))
    by_loop = await loop_client.read("function_job", "plain", None)
    by_child = await child.read("function_job", "plain", None)
    assert by_child.result == "connection"
    assert_same(by_child, by_loop)


async def test_connections_are_bounded_and_waiting_counts_toward_the_timeout(
    both: Callable[..., Any],
) -> None:
    server = ScriptedServer()
    async with server as url:
        _, child = both(config(url, timeout_s=0.5))  # max_in_flight = 4
        results = await asyncio.gather(
            *(child.read("function_job", "split", None) for _ in range(12))
        )
        assert [r.result for r in results] == ["ok"] * 12
        # Twelve at once over at most four connections, each kept for the next.
        assert server.connections == 4
        # Four hung reads hold every connection (until 0.5 s): a read that may
        # take 0.2 s waits for one and times out waiting; one that may take 0.5 s
        # gets the first slot a timeout frees.
        hung = [asyncio.ensure_future(child.read("function_job", "slow", None)) for _ in range(4)]
        await asyncio.sleep(0.05)
        child.timeout_s = 0.2
        short = await child.read("function_job", "plain", None)
        assert (short.result, short.error) == (
            "timeout",
            {"kind": "timeout", "message": "no answer in 0.2s"},
        )
        child.timeout_s = 0.5
        waited = await child.read("function_job", "plain", None)
        assert waited.result == "ok"
        assert waited.duration >= 0.2  # it could not start before a hung read gave up
        assert [r.result for r in await asyncio.gather(*hung)] == ["timeout"] * 4
        assert server.connections == 5  # the timed-out ones are not reused
