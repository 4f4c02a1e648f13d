"""The demo's event sink: a webhook receiver on loopback that checks every signature.

It verifies as a consumer would (docs/events.md), written independently of the
service's own signing code so that the demo would show a signing bug rather
than share it. A few first attempts are refused with 503 on purpose, to show
that delivery is at-least-once and that redeliveries keep their ``webhook-id``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import random
import time
from dataclasses import dataclass, field

from aiohttp import web

# The Standard Webhooks specification's replay window.
TOLERANCE_S = 300


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode("ascii")


def verify(secret: str, headers: dict[str, str], body: bytes, now: float) -> bool:
    """True when one ``v1`` signature matches and the timestamp is fresh."""
    try:
        key = base64.b64decode(secret.removeprefix("whsec_"))
        msg_id, ts = headers["webhook-id"], headers["webhook-timestamp"]
        signatures = headers["webhook-signature"].split()
        if abs(now - int(ts)) > TOLERANCE_S:
            return False
    except (KeyError, ValueError):
        return False
    expected = base64.b64encode(
        hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    ).decode()
    return any(
        version == "v1" and hmac.compare_digest(sig, expected)
        for version, _, sig in (s.partition(",") for s in signatures)
    )


@dataclass
class SinkStats:
    refused: int = 0  # answered 503 on purpose
    bad_signature: int = 0
    redeliveries: int = 0  # a webhook-id seen again after a refusal
    seen: set[str] = field(default_factory=set)

    @property
    def delivered(self) -> int:
        """Distinct events accepted with a valid signature."""
        return len(self.seen)


class EventSink:
    def __init__(self, secret: str, refuse_ratio: float, rng: random.Random) -> None:
        self.secret = secret
        self.refuse_ratio = refuse_ratio
        self.rng = rng
        self.stats = SinkStats()
        self._refused_ids: set[str] = set()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/hooks", self._receive)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = next(a[1] for a in self._runner.addresses if isinstance(a, tuple))
        self.url = f"http://127.0.0.1:{port}/hooks"
        return self.url

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _receive(self, request: web.Request) -> web.Response:
        stats = self.stats
        body = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        if not verify(self.secret, headers, body, time.time()):
            stats.bad_signature += 1
            return web.Response(status=401)
        msg_id = headers["webhook-id"]
        if msg_id in self._refused_ids:
            stats.redeliveries += 1
            self._refused_ids.discard(msg_id)
        elif msg_id not in stats.seen and self.rng.random() < self.refuse_ratio:
            # Refuse a first attempt: the outbox must come back with the same id.
            stats.refused += 1
            self._refused_ids.add(msg_id)
            return web.Response(status=503)
        stats.seen.add(msg_id)
        return web.Response(status=204)
