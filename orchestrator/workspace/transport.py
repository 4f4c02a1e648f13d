"""The transport seam: one HTTP exchange, nothing else.

``WorkspaceClient`` makes every request to a workspace through a ``Transport``
after passing its ``WorkspaceGate``; the service fills the seam with aiohttp,
tests with a fake (as httpx takes a transport). A transport neither retries,
classifies nor rate-limits: it answers or raises.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import aiohttp
from yarl import URL


class TransportError(Exception):
    """No HTTP answer (refused, reset, DNS, TLS); the message names what happened."""


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


class AiohttpTransport:
    def __init__(self, session: aiohttp.ClientSession) -> None:
        self._session = session
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}

    async def send(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes | None,
        timeout_s: float,
    ) -> Answer:
        timeout = self._timeouts.get(timeout_s)
        if timeout is None:
            timeout = self._timeouts[timeout_s] = aiohttp.ClientTimeout(total=timeout_s)
        try:
            # encoded=True: ids are validated URL-safe and queries encoded by the
            # client; skipping re-quoting keeps the hot path cheap.
            async with self._session.request(
                method,
                URL(url, encoded=True),
                headers=headers,
                data=body,
                timeout=timeout,
                allow_redirects=False,
            ) as resp:
                raw = await resp.read()
                return Answer(resp.status, raw, resp.headers.get("Retry-After"))
        except (aiohttp.ClientError, OSError) as exc:
            raise TransportError(type(exc).__name__) from exc
