"""A lean HTTP/1.1 client for status reads, used by the reader processes (see ``readers``).

A restart's first reads are a hundred thousand GETs of small bodies made by
processes that do nothing else. aiohttp's client spent 0.1-0.19 ms of CPU on
each on the team's 2-core box (the pooling, tracing, cookie, redirect and
timeout machinery of a general client, in Python); the reads were the largest
part of the restart's CPU. This client does only what a status read needs, for
about a third of that, and leaves the parsing of HTTP to httptools (llhttp,
the parser of Node.js, in C):

- GET with fixed headers; at most ``limit`` keep-alive connections, the most
  recently used taken first;
- Content-Length, chunked and read-until-close bodies; gzip and deflate bodies
  inflated (none is asked for);
- a total timeout per request, connection included;
- a kept-alive connection that the server closed before answering is retried
  once on a new connection, as aiohttp does for idempotent requests.

Failures raise exceptions named like aiohttp's (``ClientConnectorError``,
``ServerDisconnectedError``, ``ClientPayloadError``, ``ClientResponseError``),
so that a read's error message reads the same whichever process made it.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import zlib
from collections import deque
from typing import cast
from urllib.parse import urlsplit

import httptools


class ClientConnectorError(OSError):
    """The connection could not be opened."""


class ServerDisconnectedError(ConnectionError):
    """The connection ended before the answer was complete."""


class ClientPayloadError(ConnectionError):
    """The connection ended in the middle of the body."""


class ClientResponseError(ConnectionError):
    """What came back is not HTTP/1.x that can be read."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection, one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[tuple[int, bytes, str | None]] | None = None
        self.open = True
        self.received = False  # any byte of the current answer
        self._reset()

    def _reset(self) -> None:
        self.body: list[bytes] = []
        self.retry_after: str | None = None
        self.encoding: bytes | None = None
        self.framed = False  # Content-Length or chunked: the end is known without a close
        self.headers_done = False
        self.complete = False
        self.keep_alive = False
        self.stray = False

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports are not subclasses of asyncio's)
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # A request is one small write: Nagle would hold it back.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        if self.waiter is None or self.waiter.done():
            # Bytes nobody asked for (a server's parting 408, say): the
            # connection is in no state to be reused.
            self.close()
            return
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ClientResponseError(f"unreadable answer: {exc}"))
            return
        if self.stray:
            self.close()  # more than the answer came: not reusable

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost settles the answer

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        if self.headers_done and not self.framed and not self.complete:
            # No length and no chunks: the body ran until the server closed.
            self.complete = True  # (and not kept alive: it is closed)
            self._finish()
        elif self.headers_done:
            self._fail(ClientPayloadError("response payload is not completed"))
        else:
            self._fail(ServerDisconnectedError("server disconnected"))

    # httptools callbacks

    def on_message_begin(self) -> None:
        if self.complete:
            self.stray = True  # a second message after the answer, in the same bytes

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"retry-after":
            self.retry_after = value.decode("latin-1")
        elif name == b"content-encoding":
            self.encoding = value.strip().lower()
        elif name == b"content-length" or (
            name == b"transfer-encoding" and b"chunked" in value.lower()
        ):
            self.framed = True

    def on_headers_complete(self) -> None:
        self.headers_done = True
        status = self.parser.get_status_code()
        if status < 200 or status in (204, 304):
            self.framed = True  # no body whatever the headers say

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        if self.parser.get_status_code() < 200:
            self._reset()  # an informational answer (1xx): the real one follows
            return
        # Asked here: llhttp forgets the message's flags once this returns.
        self.keep_alive = self.parser.should_keep_alive()
        self.complete = True
        self._finish()

    # requests

    def request(self, data: bytes) -> asyncio.Future[tuple[int, bytes, str | None]]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.received = False
        self._reset()
        self.transport.write(data)
        return self.waiter

    @property
    def reusable(self) -> bool:
        return self.open and self.complete and self.keep_alive and not self.stray

    def close(self) -> None:
        self.open = False
        if self.transport is not None:
            self.transport.close()

    def expire(self) -> None:
        """The request's time is up: the connection goes, the request fails."""
        self._fail(TimeoutError())

    def _finish(self) -> None:
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        raw = b"".join(self.body)
        if self.encoding in (b"gzip", b"x-gzip", b"deflate"):
            try:
                # wbits 47: gzip or zlib, told apart by the header.
                raw = zlib.decompressobj(47).decompress(raw)
            except zlib.error as exc:
                self._fail(ClientResponseError(f"cannot inflate body: {exc}"))
                return
        elif self.encoding not in (None, b"identity"):
            self._fail(ClientResponseError("unsupported Content-Encoding"))
            return
        waiter.set_result((self.parser.get_status_code(), raw, self.retry_after))

    def _fail(self, exc: Exception) -> None:
        self.close()
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)


class LeanClient:
    """GETs to one HTTP(S) origin (scheme, host and port of ``base_url``)."""

    def __init__(self, base_url: str, headers: dict[str, str], limit: int) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("base_url must be an http(s) URL with a host")
        self.host = parts.hostname
        default_port = 443 if parts.scheme == "https" else 80
        self.port = parts.port or default_port
        self.prefix = parts.path.rstrip("/")
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        host_header = parts.netloc.rsplit("@", 1)[-1]
        lines = [f"Host: {host_header}", *(f"{k}: {v}" for k, v in headers.items())]
        self._head_tail = ("\r\n".join(["", *lines, "", ""])).encode("latin-1")
        self._idle: list[_Connection] = []
        # Connections that may be open at once, and the requests waiting for one
        # (a plain count: most requests find a slot, and take it without a coroutine).
        self._free = limit
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._closed = False

    async def get(self, target: str, timeout_s: float) -> tuple[int, bytes, str | None]:
        """(status, body, Retry-After header) of ``GET prefix + target``.

        ``target`` is a path (and query) already percent-encoded. TimeoutError
        once ``timeout_s`` has passed: waiting for a connection, connecting and
        the exchange all count, as in aiohttp's ``ClientTimeout(total=...)``.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        data = b"GET " + (self.prefix + target).encode("ascii") + b" HTTP/1.1" + self._head_tail
        if self._free > 0:
            self._free -= 1
        else:
            await self._wait_for_slot(loop, deadline)
        try:
            conn = self._take()
            if conn is not None:
                try:
                    return await self._exchange(loop, conn, data, deadline)
                except ServerDisconnectedError:
                    if conn.received:
                        raise
                    # Closed by the server while it sat idle: once more on a new one.
            async with asyncio.timeout_at(deadline):
                conn = await self._connect(loop)
            return await self._exchange(loop, conn, data, deadline)
        finally:
            self._release()

    async def _wait_for_slot(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        waiter = loop.create_future()
        self._waiting.append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._release()  # handed a slot just as it gave up: pass it on
            raise

    def _release(self) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot goes straight to the waiter
                return
        self._free += 1

    async def _exchange(
        self, loop: asyncio.AbstractEventLoop, conn: _Connection, data: bytes, deadline: float
    ) -> tuple[int, bytes, str | None]:
        waiter = conn.request(data)
        # A bare timer: asyncio.timeout's machinery was a tenth of a read's CPU.
        timer = loop.call_at(deadline, conn.expire)
        try:
            answer = await waiter
        except BaseException:
            conn.close()  # cancelled or failed halfway: its state is unknown
            raise
        finally:
            timer.cancel()
        if conn.reusable and not self._closed:
            self._idle.append(conn)
        else:
            conn.close()
        return answer

    def _take(self) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()
            if conn.open:
                return conn
        return None

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        try:
            _, conn = await loop.create_connection(
                _Connection,
                self.host,
                self.port,
                ssl=self._ssl,
                server_hostname=self.host if self._ssl is not None else None,
            )
        except OSError as exc:
            raise ClientConnectorError(f"cannot connect: {exc.strerror or exc}") from exc
        return conn

    def close(self) -> None:
        self._closed = True
        for conn in self._idle:
            conn.close()
        self._idle.clear()
