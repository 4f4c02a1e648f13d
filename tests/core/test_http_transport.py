"""The HTTP transport against real servers on 127.0.0.1: each quirk of the client
library stops at ``orchestrator.transport``.

The servers here are raw asyncio streams, so that a test decides byte by byte
what the peer does (hold a request, close a kept-alive connection as a
request arrives, cut a body short, answer without end).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import pytest
import trustme
from aiohttp import web

from orchestrator.clock import SystemClock
from orchestrator.config import WorkspaceConfig
from orchestrator.errors import ConfigError
from orchestrator.simulator import start_simulator
from orchestrator.transport import AnswerTooLarge, HttpTransport, TransportError
from orchestrator.workspace.client import workspace_client

JOB = b'{"Data": {"JobId": "J-1", "Status": "Queued"}}'

Handler = Callable[["Peer", asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class Peer:
    """A scripted HTTP/1.1 server: counts connections and the requests it read."""

    handler: Handler
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    open_now: int = 0
    port: int = 0
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def read_request(self, reader: asyncio.StreamReader) -> bytes | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await reader.readexactly(length) if length else b""
        self.requests.append(head + body)
        return head + body

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open_now += 1
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            await self.handler(self, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self.open_now -= 1
            self.tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()


def reply(status: int = 200, body: bytes = JOB, extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}"
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


@asynccontextmanager
async def peer(handler: Handler) -> AsyncIterator[Peer]:
    p = Peer(handler)
    server = await asyncio.start_server(p._serve, "127.0.0.1", 0)
    p.port = server.sockets[0].getsockname()[1]
    try:
        yield p
    finally:
        server.close()
        # Connections still open (held on purpose) end with the server, and are
        # closed before the test's loop is.
        for task in p.tasks:
            task.cancel()
        await asyncio.gather(*p.tasks, return_exceptions=True)


async def keep_alive(p: Peer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while await p.read_request(reader) is not None:
        writer.write(reply())
        await writer.drain()


async def hold(p: Peer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Read the request, then answer nothing until the client goes away."""
    await p.read_request(reader)
    await reader.read()


def url(p: Peer, path: str = "/api/workspace/functions/jobs/J-1") -> str:
    return f"http://127.0.0.1:{p.port}{path}"


def transport(limit: int = 4 * 1024 * 1024, connections: int = 8) -> HttpTransport:
    return HttpTransport(max_connections=connections, max_response_bytes=limit)


async def wait_until(check: Callable[[], bool], within_s: float = 5.0) -> None:
    async with asyncio.timeout(within_s):
        while not check():
            await asyncio.sleep(0.02)


# -- answers and connections ---------------------------------------------------------------


async def test_a_read_answers_and_reuses_one_connection() -> None:
    async with peer(keep_alive) as p:
        t = transport()
        try:
            for _ in range(20):
                answer = await t.send("GET", url(p), {"Accept": "application/json"}, None, 5)
                assert (answer.status, answer.body) == (200, JOB)
        finally:
            await t.close()
    assert p.connections == 1
    assert len(p.requests) == 20


async def test_redirects_are_answers_not_hops() -> None:
    async def redirect(p: Peer, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while await p.read_request(reader) is not None:
            w.write(reply(302, b"", f"Location: http://127.0.0.1:{p.port}/elsewhere\r\n"))

    async with peer(redirect) as p:
        t = transport()
        try:
            answer = await t.send("GET", url(p), {}, None, 5)
        finally:
            await t.close()
    assert answer.status == 302
    assert len(p.requests) == 1


async def test_the_body_sent_is_the_bytes_given_and_retry_after_is_raw() -> None:
    signed = b'{"b": 1,  "a": [2, 1]}'  # not what a JSON helper would write

    async def echo(p: Peer, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while await p.read_request(reader) is not None:
            w.write(reply(429, b"{}", "Retry-After: Wed, 21 Oct 2026 07:28:00 GMT\r\n"))

    async with peer(echo) as p:
        t = transport()
        try:
            headers = {"Content-Type": "application/cloudevents+json", "webhook-id": "msg_1"}
            answer = await t.send("POST", url(p, "/hooks"), headers, signed, 5)
        finally:
            await t.close()
    assert answer.retry_after == "Wed, 21 Oct 2026 07:28:00 GMT"
    head, _, body = p.requests[0].partition(b"\r\n\r\n")
    assert body == signed
    assert b"content-type: application/cloudevents+json" in head.lower()
    assert b"\r\nwebhook-id: msg_1" in head


# -- cancellation --------------------------------------------------------------------------


async def test_reads_cancelled_from_outside_give_their_slots_back() -> None:
    """Five reads cancelled while the workspace holds them; the sixth is answered.

    With the library's own connection limit (2 here), the cancelled requests
    would keep their permits until their timeouts and the sixth would fail.
    """
    held: list[int] = []

    async def first_five_hang(
        p: Peer, reader: asyncio.StreamReader, w: asyncio.StreamWriter
    ) -> None:
        while await p.read_request(reader) is not None:
            if len(p.requests) <= 5:
                held.append(len(p.requests))
                await reader.read()
                return
            w.write(reply())

    async with peer(first_five_hang) as p:
        cfg = WorkspaceConfig(
            base_url=f"http://127.0.0.1:{p.port}", max_in_flight=2, request_timeout_s=30
        )
        client = workspace_client(cfg, None, SystemClock())
        try:
            for _ in range(5):
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(0.2):
                        await client.read("function_job", "J-1")
            assert client.gate.in_flight() == 0
            async with asyncio.timeout(5):  # not held until the cancelled ones time out
                read = await client.read("function_job", "J-1")
        finally:
            await client.close()
    assert len(held) == 5
    assert read.result == "ok" and read.http_status == 200


async def test_an_anyio_cancel_scope_stops_a_request_and_nothing_else() -> None:
    async with peer(hold) as p:
        t = transport()
        try:
            reached_after_scope = False
            with anyio.move_on_after(0.2) as scope:
                await t.send("GET", url(p), {}, None, 30)
            reached_after_scope = True
            with pytest.raises(TimeoutError):
                with anyio.fail_after(0.2):
                    await t.send("GET", url(p), {}, None, 30)
        finally:
            await t.close()
    assert scope.cancelled_caught
    assert reached_after_scope


async def test_closing_ends_every_request_still_running() -> None:
    """Shutdown under load: ``close`` ends every exchange at once (each would
    otherwise wait a minute for its timeout), as a ``TransportError``."""
    async with peer(hold) as p:
        t = transport()
        tasks = [asyncio.create_task(t.send("GET", url(p), {}, None, 60)) for _ in range(8)]
        await wait_until(lambda: len(p.requests) == 8)
        await t.close()
        async with asyncio.timeout(2):
            ended = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(e, TransportError) for e in ended), ended


async def test_a_command_its_caller_gave_up_on_is_never_sent_later() -> None:
    """A read cancelled from outside still runs inside the client library until its
    timeout. A cancel POST made meanwhile goes out at once or not at all: it never
    waits inside the library for that read to end and reaches the workspace after
    its caller gave up."""
    async with peer(hold) as p:
        cfg = WorkspaceConfig(
            base_url=f"http://127.0.0.1:{p.port}", max_in_flight=1, request_timeout_s=1.5
        )
        client = workspace_client(cfg, None, SystemClock())
        try:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await client.read("function_job", "J-1")
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await client.cancel("J-1")
            seen_when_given_up = len(p.requests)
            await asyncio.sleep(2.5)  # past the cancelled read's own timeout
        finally:
            await client.close()
    assert len(p.requests) == seen_when_given_up
    assert [r.split(b" ", 1)[0] for r in p.requests] == [b"GET", b"POST"]


# -- trouble, classified -------------------------------------------------------------------


async def test_a_kept_alive_connection_closed_as_a_read_arrives_costs_no_error() -> None:
    """The server closes its kept-alive connection when the second request comes
    (as a keep-alive timeout racing a request does): the read is sent once more on
    a fresh connection; a POST, which may have been acted on, is not."""

    async def one_per_connection(
        p: Peer, reader: asyncio.StreamReader, w: asyncio.StreamWriter
    ) -> None:
        if await p.read_request(reader) is None:
            return
        w.write(reply())  # keep-alive: the client pools the connection
        await w.drain()
        await p.read_request(reader)  # ... and the next request on it gets no answer

    async with peer(one_per_connection) as p:
        t = transport()
        try:
            first = await t.send("GET", url(p), {}, None, 5)
            second = await t.send("GET", url(p), {}, None, 5)
            with pytest.raises(TransportError):
                await t.send("POST", url(p, "/cancel"), {}, b"{}", 5)
        finally:
            await t.close()
    assert first.status == second.status == 200
    # GET answered; GET unanswered, sent again on a new connection; POST unanswered.
    assert [r.split(b" ", 1)[0] for r in p.requests] == [b"GET", b"GET", b"GET", b"POST"]
    assert p.connections == 2


async def test_trouble_is_timeout_or_connection_never_an_answer() -> None:
    async def cut_short(p: Peer, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await p.read_request(reader)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + JOB[:10])
        await w.drain()

    async def refuse_after_reading(
        p: Peer, reader: asyncio.StreamReader, w: asyncio.StreamWriter
    ) -> None:
        await p.read_request(reader)

    for handler, kind in ((hold, "timeout"), (cut_short, "connection"),
                          (refuse_after_reading, "connection")):  # fmt: skip
        async with peer(handler) as p:
            cfg = WorkspaceConfig(base_url=f"http://127.0.0.1:{p.port}", request_timeout_s=0.5)
            client = workspace_client(cfg, None, SystemClock())
            try:
                read = await client.read("function_job", "J-1")
            finally:
                await client.close()
        assert read.result == kind, (handler.__name__, read)
        assert read.error is not None and read.error["kind"] == kind


async def test_refused_connection_is_connection_trouble() -> None:
    with socket_bound() as port:
        cfg = WorkspaceConfig(base_url=f"http://127.0.0.1:{port}", request_timeout_s=2)
        client = workspace_client(cfg, None, SystemClock())
        try:
            read = await client.read("function_job", "J-1")
        finally:
            await client.close()
    assert read.result == "connection"


async def test_an_endless_body_is_refused_without_being_held() -> None:
    async def endless(p: Peer, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await p.read_request(reader)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
        w.write(b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * 65536
        framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
        for _ in range(20_000):  # 1.3 GB at most, if nothing stopped reading
            w.write(framed)
            await w.drain()

    async with peer(endless) as p:
        cfg = WorkspaceConfig(
            base_url=f"http://127.0.0.1:{p.port}",
            request_timeout_s=30,
            max_response_bytes=1024 * 1024,
        )
        client = workspace_client(cfg, None, SystemClock())
        before = rss_mb()
        peak = before
        reading = asyncio.create_task(client.read("function_job", "J-1"))
        try:
            while not reading.done():
                peak = max(peak, rss_mb())
                await asyncio.sleep(0.005)
            read = reading.result()
        finally:
            await client.close()
        grown = peak - before
    assert read.result == "invalid_response"
    assert read.error is not None and "over 1048576 bytes" in read.error["message"]
    assert grown < 64, f"RSS grew {grown:.0f} MB reading a body capped at 1 MiB"


async def test_an_answer_at_the_limit_is_read_whole() -> None:
    body = b'{"x": "' + b"y" * (2048 - 9) + b'"}'
    assert len(body) == 2048

    async def exact(p: Peer, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while await p.read_request(reader) is not None:
            w.write(reply(200, body))

    async with peer(exact) as p:
        t = transport(limit=2048)
        try:
            assert (await t.send("GET", url(p), {}, None, 5)).body == body
        finally:
            await t.close()
        t = transport(limit=2047)
        try:
            with pytest.raises(AnswerTooLarge) as raised:
                await t.send("GET", url(p), {}, None, 5)
        finally:
            await t.close()
    assert raised.value.status == 200


# -- TLS -----------------------------------------------------------------------------------


@asynccontextmanager
async def tls_workspace(ca: trustme.CA) -> AsyncIterator[int]:
    async def job(_: web.Request) -> web.Response:
        return web.Response(body=JOB, content_type="application/json")

    app = web.Application()
    app.router.add_get("/api/workspace/functions/jobs/{id}", job)
    runner = web.AppRunner(app)
    await runner.setup()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


async def test_tls_is_verified_against_the_configured_ca_bundle(tmp_path: object) -> None:
    from pathlib import Path

    ca = trustme.CA()
    bundle = Path(str(tmp_path)) / "platform-ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    async with tls_workspace(ca) as port:
        base = f"https://127.0.0.1:{port}"
        trusted = workspace_client(
            WorkspaceConfig(base_url=base, ca_bundle=str(bundle)), None, SystemClock()
        )
        unknown = workspace_client(WorkspaceConfig(base_url=base), None, SystemClock())
        try:
            ok = await trusted.read("function_job", "J-1")
            refused = await unknown.read("function_job", "J-1")
        finally:
            await trusted.close()
            await unknown.close()
    assert ok.result == "ok" and ok.body == {"Data": {"JobId": "J-1", "Status": "Queued"}}
    assert refused.result == "connection"
    assert refused.error is not None and "certificate" in refused.error["message"].lower()


def test_an_unreadable_ca_bundle_is_a_configuration_error(tmp_path: object) -> None:
    missing = f"{tmp_path}/nowhere.pem"
    with pytest.raises(ConfigError, match=r"^workspaces\.ca_bundle: cannot read .*nowhere\.pem"):
        workspace_client(WorkspaceConfig(ca_bundle=missing), None, SystemClock())


# -- helpers -------------------------------------------------------------------------------


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class socket_bound:
    """A loopback port that is bound but never listened on: connections are refused."""

    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        port: int = self.sock.getsockname()[1]
        return port

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


# -- process exit ----------------------------------------------------------------------------

EXIT_SCRIPT = """
import asyncio, sys
from orchestrator.transport import HttpTransport

async def main(url):
    t = HttpTransport(max_connections=8, max_response_bytes=1 << 20)
    await asyncio.gather(*(t.send("GET", url, {}, None, 10) for _ in range(6)))
    await t.close()

asyncio.run(main(sys.argv[1]))
"""


async def test_a_process_that_closed_its_transport_exits_cleanly() -> None:
    """After concurrent requests and ``close``, the interpreter's exit must not race
    the library's thread: it aborted (134) about one exit in ten while other
    processes kept the CPU busy, as on a shared machine."""
    busy = [
        await asyncio.create_subprocess_exec(sys.executable, "-c", "while True: pass")
        for _ in range(3)
    ]
    sim = await start_simulator(host="127.0.0.1", port=0, profile="fast", seed=1)
    try:
        codes = []
        for _ in range(40):
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", EXIT_SCRIPT, sim.url + "/api/workspace/admin/function-catalog",
                stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            _, err = await asyncio.wait_for(proc.communicate(), 60)
            codes.append((proc.returncode, err.decode()[-300:]))
    finally:
        await sim.close()
        for p in busy:
            p.kill()
            await p.wait()
    assert [c for c in codes if c[0] != 0] == []


THREADS_SCRIPT = """
import os

def threads():
    return len(os.listdir("/proc/self/task"))

before = threads()
import orchestrator.cli, orchestrator.service, orchestrator.transport
imported = threads()
orchestrator.transport.HttpTransport(max_connections=1, max_response_bytes=1024)
print(before, imported, threads())
"""


async def test_no_client_exists_until_a_transport_is_made() -> None:
    """A client of the library does not survive a fork: importing the service makes
    none (and starts none of its threads), so a process forked before it makes its
    transports is safe; the benchmark and the tests start processes by exec."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", THREADS_SCRIPT, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    before, imported, made = (int(n) for n in out.split())
    assert imported == before
    assert made > imported  # the library's runtime thread starts with the first client
