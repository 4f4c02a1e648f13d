"""The transport seam: one HTTP exchange, nothing else.

Every request the service sends (a workspace's reads and commands, webhook
deliveries) goes out through a ``Transport``; the service fills the seam with
``HttpTransport``, tests with a fake (as httpx takes a transport). A
transport neither rate-limits, classifies nor counts: it answers or raises.

``HttpTransport`` sends through pyreqwest (reqwest and hyper, in Rust), which
spends about half the CPU per request of the Python client the service used
before (measured in docs/performance.md). The library's quirks end
here; nothing above this module sees them:

- a request cancelled from outside keeps running on the library's thread
  until its own timeout, and the library's ``CancelledError`` drops the
  canceller's message (by which anyio knows its cancel scopes): the exchange
  runs in a task of its own, shielded, and an outside cancel cancels that
  task and re-raises the canceller's own ``CancelledError``; every request
  carries the library's timeout, so nothing it leaves running outlives it;
- the library's connection limit queues a request it may send long after its
  caller gave up: it is not used, the callers' gates bound what is in flight;
- a pooled connection that the server closed as the request went out gives
  no answer at all: idle connections are dropped before a server's usual
  keep-alive ends, and a GET that got no answer is sent once more at once;
- its errors name the phase, not the cause (a timeout after sending is a
  ``ConnectTimeoutError``, a body cut short a ``BodyDecodeError``): they are
  mapped to ``TimeoutError`` (no answer in time) or ``TransportError``;
- a body is read as a stream up to ``max_response_bytes`` and refused past
  it (``AnswerTooLarge``), never held whole;
- header names go out in lower case (as HTTP/2 and the Standard Webhooks
  specification write them; the library would title-case them);
- redirects are not followed, no proxy is taken from the environment, and
  the body sent is exactly the bytes given (a signature covers them).
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import time
from datetime import timedelta
from typing import NamedTuple, Protocol

from pyreqwest import exceptions as rq
from pyreqwest.client import Client, ClientBuilder

USER_AGENT = "moltaro-orchestrator"
# Past this, a response body is read from the socket as it is asked for; below
# it, the library buffers it before handing the response over.
READ_BUFFER_BYTES = 16 * 1024
# The library's thread hands each answer over holding the GIL, and a socket write
# inside lets the main thread run on: the interpreter must not finalize before that
# thread takes the GIL back and lets it go (else exit aborts: 16 of 150 exits under
# CPU load, none of 400 with this pause at exit).
EXIT_GRACE_S = 0.02


def _exit_grace() -> None:
    time.sleep(EXIT_GRACE_S)  # the GIL is free meanwhile


class TransportError(Exception):
    """No HTTP answer (refused, reset, cut short, TLS); the message names what happened."""


class AnswerTooLarge(TransportError):
    """The workspace answered, but its body passed the configured limit (not kept)."""

    def __init__(self, status: int, retry_after: str | None, limit: int) -> None:
        super().__init__(f"response body over {limit} bytes")
        self.status = status
        self.retry_after = retry_after


class _Unanswered(TransportError):
    """The connection ended before a whole answer came."""


class Answer(NamedTuple):
    status: int
    body: bytes
    retry_after: str | None = None  # the raw header, when the response carried one


class Transport(Protocol):
    async def send(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes | None,
        timeout_s: float,
    ) -> Answer:
        """One exchange; raises ``TimeoutError`` or ``TransportError`` without an answer."""
        ...

    async def close(self) -> None:
        """End every exchange still running and free the connections."""
        ...


class HttpTransport:
    """HTTP/1.1 over pyreqwest: a pool of at most ``max_connections`` idle
    connections per host, kept ``idle_timeout_s``; system trust store plus
    ``ca_pem`` (a private CA's certificates)."""

    def __init__(
        self,
        *,
        max_connections: int,
        max_response_bytes: int,
        idle_timeout_s: float = 15.0,
        ca_pem: bytes | None = None,
    ) -> None:
        builder = (
            ClientBuilder()
            .follow_redirects(False)
            .no_proxy()
            .referer(False)
            .user_agent(USER_AGENT)
            .http1_lower_case_headers()
            .pool_max_idle_per_host(max_connections)
            .pool_idle_timeout(timedelta(seconds=idle_timeout_s))
        )
        if ca_pem:
            builder = builder.add_root_certificate_pem(ca_pem)
        self._client: Client = builder.build()
        atexit.unregister(_exit_grace)  # once per process, however many transports
        atexit.register(_exit_grace)
        self._limit = max_response_bytes
        self._buffer = min(READ_BUFFER_BYTES, max_response_bytes + 1)
        self._timeouts: dict[float, timedelta] = {}
        # Exchanges whose caller was cancelled, until the library lets them go.
        self._orphans: set[asyncio.Task[Answer]] = set()

    async def send(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes | None,
        timeout_s: float,
    ) -> Answer:
        exchange = asyncio.ensure_future(self._exchange(method, url, headers, body, timeout_s))
        try:
            return await asyncio.shield(exchange)
        except asyncio.CancelledError:
            if not exchange.done():
                exchange.cancel()
                self._orphans.add(exchange)
                exchange.add_done_callback(self._orphans.discard)
            raise

    async def close(self) -> None:
        for task in list(self._orphans):
            task.cancel()
        await self._client.close()
        # The library's objects left in reference cycles are freed now, while the
        # interpreter runs: freed as it exits, they can abort the process (a third of
        # the exits after concurrent requests, pyreqwest 0.15.1).
        gc.collect()

    async def _exchange(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, timeout_s: float
    ) -> Answer:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            return await self._once(method, url, headers, body, timeout_s)
        except _Unanswered:
            left_s = timeout_s - (loop.time() - started)
            if method != "GET" or left_s <= 0:
                raise
        # A GET that got no answer at all, most often a pooled connection the server
        # had just closed: once more, on a fresh connection, within the same timeout.
        return await self._once(method, url, headers, body, left_s)

    async def _once(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, timeout_s: float
    ) -> Answer:
        builder = (
            self._client.request(method, url)
            .headers(headers)
            .timeout(self._timeout(timeout_s))
            .streamed_read_buffer_limit(self._buffer)
        )
        if body is not None:
            builder = builder.body_bytes(body)
        try:
            async with builder.build_streamed() as resp:
                status = resp.status
                retry_after = resp.get_header("retry-after")
                raw = await resp.body_reader.read(self._limit + 1)
                if raw is not None and len(raw) > self._limit:
                    raise AnswerTooLarge(status, retry_after, self._limit)
                return Answer(status, b"" if raw is None else bytes(raw), retry_after)
        except rq.RequestTimeoutError:
            raise TimeoutError(f"no answer in {timeout_s:g} s") from None
        except rq.NetworkError as exc:
            raise _Unanswered(_reason(exc)) from None
        except rq.PyreqwestError as exc:
            raise TransportError(_reason(exc)) from None

    def _timeout(self, seconds: float) -> timedelta:
        """The configured timeouts, made once each (a retry's remainder is made anew)."""
        timeout = self._timeouts.get(seconds)
        if timeout is None:
            timeout = timedelta(seconds=seconds)
            if len(self._timeouts) < 16:
                self._timeouts[seconds] = timeout
        return timeout


def _reason(exc: rq.PyreqwestError) -> str:
    """The library's error as one line: its kind and its innermost cause."""
    details = getattr(exc, "details", None)
    causes = details.get("causes") if isinstance(details, dict) else None
    cause = causes[-1]["message"] if causes else exc.message
    return f"{type(exc).__name__}: {cause}"
