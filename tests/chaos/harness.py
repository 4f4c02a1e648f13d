"""Shared pieces of the chaos suite and of ``scripts/chaos.py``.

A real ``orchestrator serve`` subprocess (killed with SIGKILL and restarted at
will), the bundled simulator serving scripted jobs and builds whose final state
is known in advance (the truth), a real webhook sink that verifies signatures,
and the check that compares what the service reported with the truth.
"""

from __future__ import annotations

import asyncio
import base64
import os
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from standardwebhooks import Webhook

EXPECTED = {
    "Completed": "succeeded",
    "Failed": "failed",
    "Cancelled": "cancelled",
    "Succeeded": "succeeded",
}
KINDS = ("function_job", "net_operation_build", "workspace_ui_build")
ENDS = {
    "function_job": ("Completed", "Failed", "Cancelled"),
    "net_operation_build": ("Succeeded", "Failed", "Cancelled"),
    "workspace_ui_build": ("Succeeded", "Failed", "Cancelled"),
}

# Every kind of trouble a Moltaro workspace can cause on its status routes, at
# ratios that leave each tracking a good chance to finish within seconds.
# Injected 404s stay rare and never span not_found_min_s: they must not end anything.
_TROUBLE: list[dict[str, Any]] = [
    {"fault": "http_5xx", "status": 500},
    {"fault": "http_5xx", "status": 502},
    {"fault": "rate_limited", "retry_after_s": 1},
    {"fault": "unavailable", "retry_after_s": 1, "retry_after_format": "http_date"},
    {"fault": "reset"},
    {"fault": "malformed"},
]

PLATFORM_FAULTS: list[dict[str, Any]] = [
    {"route": "*", "fault": "latency", "ratio": 0.1, "latency_s": 0.25},
    # One of each, for sure, on the first job status reads: ratios alone left a
    # CI-sized run (~200 reads) a few percent chance of never drawing a 2 % rule
    # that sits behind two others.
    *({"route": "job_status", **rule, "ratio": 1.0, "max_hits": 1} for rule in _TROUBLE),
    *(
        rule
        for route in ("job_status", "build_status")
        for rule in (
            {"route": route, "fault": "http_5xx", "ratio": 0.08, "status": 500},
            {"route": route, "fault": "http_5xx", "ratio": 0.03, "status": 502},
            {"route": route, "fault": "rate_limited", "ratio": 0.02, "retry_after_s": 1},
            {
                "route": route,
                "fault": "unavailable",
                "ratio": 0.02,
                "retry_after_s": 1,
                "retry_after_format": "http_date",
            },
            {"route": route, "fault": "reset", "ratio": 0.04},
            {"route": route, "fault": "malformed", "ratio": 0.05},
            {"route": route, "fault": "not_found", "ratio": 0.03},
        )
    ),
]


def new_whsec() -> str:
    return "whsec_" + base64.b64encode(os.urandom(24)).decode()


@dataclass
class Secrets:
    """Every secret the service is given; none may ever show up in its output."""

    api_token: str = field(default_factory=lambda: "tok-" + os.urandom(12).hex())
    workspace_token: str = field(default_factory=lambda: "wst-" + os.urandom(12).hex())
    sink_secret: str = field(default_factory=new_whsec)
    callback_secret: str = field(default_factory=new_whsec)

    def env(self) -> dict[str, str]:
        return {
            "ORCH_API_TOKENS": f"{self.api_token},other-{self.api_token[::-1]}",
            "WORKSPACE_API_TOKEN": self.workspace_token,
            "ORCH_SINK_SECRET": self.sink_secret,
            "ORCH_CALLBACK_SECRET": self.callback_secret,
        }

    def values(self) -> list[str]:
        raw = [self.api_token, self.workspace_token, self.sink_secret, self.callback_secret]
        # The base64 key inside a whsec_ secret is the secret too.
        return raw + [s.removeprefix("whsec_") for s in raw if s.startswith("whsec_")]


def write_config(
    directory: Path,
    *,
    port: int,
    sim_url: str,
    store_path: Path,
    sink_url: str | None = None,
    down_url: str | None = None,
    callback_prefix: str | None = None,
    max_delay_s: float = 0.3,
    level: str = "INFO",
) -> Path:
    """A TOML configuration for a fast-polling service on loopback."""
    sinks = ""
    if sink_url is not None:
        sinks = f"""
[[events.sinks]]
name = "main"
url = "{sink_url}"
secret_env = "ORCH_SINK_SECRET"
"""
    down = ""
    if down_url is not None:
        down = f"""
[[workspaces]]
name = "down"
base_url = "{down_url}"
request_timeout_s = 1
"""
    allow = f'["{callback_prefix}"]' if callback_prefix else "[]"
    cfg = directory / "orchestrator.toml"
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:{port}"
shutdown_grace_s = 2
shutdown_hard_s = 2

[store]
path = "{store_path}"

[polling]
initial_delay_s = 0.05
max_delay_s = {max_delay_s}
jitter = 0.2
not_found_confirmations = 3
not_found_min_s = 2.0
default_deadline_s = 120

[logging]
format = "json"
level = "{level}"

[events]
retry_schedule_s = [0.2, 0.5, 1.0]
delivery_timeout_s = 2
callback_allowlist = {allow}
{sinks}
[[workspaces]]
name = "default"
base_url = "{sim_url}"
request_timeout_s = 2
{down}"""
    )
    return cfg


@dataclass
class Hit:
    event: dict[str, Any]
    headers: dict[str, str]


class Sink:
    """A webhook receiver: verifies every signature, records every event.

    ``fail_ratio`` of deliveries are refused (503 with Retry-After or 500), so
    the outbox's retries and redeliveries are part of every run.
    """

    def __init__(
        self, secret: str, *, fail_ratio: float = 0.0, seed: int = 1, callback_secret: str = ""
    ) -> None:
        self.webhook = Webhook(secret)
        # Callbacks are signed with events.callback_secret_env's secret.
        self.callback_webhook = Webhook(callback_secret or secret)
        self.fail_ratio = fail_ratio
        self.rng = random.Random(seed)
        self.hits: list[Hit] = []
        self.refused = 0
        self.bad_signatures = 0
        self.delay_s = 0.0
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def _receive(self, request: web.Request) -> web.Response:
        body = await request.read()
        headers = dict(request.headers)
        try:
            hook = self.callback_webhook if "/callbacks/" in request.path else self.webhook
            event = hook.verify(body, headers)
        except Exception:
            self.bad_signatures += 1
            return web.Response(status=400)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.rng.random() < self.fail_ratio:
            self.refused += 1
            if self.rng.random() < 0.5:
                return web.Response(status=503, headers={"Retry-After": "1"})
            return web.Response(status=500)
        self.hits.append(Hit(event, headers))
        return web.Response(status=204)

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/hooks", self._receive)
        app.router.add_post("/callbacks/{name}", self._receive)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = next(a[1] for a in self._runner.addresses if isinstance(a, tuple))
        self.url = f"http://127.0.0.1:{port}"
        return self.url + "/hooks"

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def terminal_hits(self) -> int:
        return sum(1 for h in self.hits if not h.event["type"].endswith("status_changed"))

    def terminal_ids(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = defaultdict(set)
        for hit in self.hits:
            if not hit.event["type"].endswith("status_changed"):
                out[hit.event["subject"]].add(hit.event["id"])
        return out


class Client:
    """The calls a calling service makes, with the bearer token."""

    def __init__(self, session: aiohttp.ClientSession, base: str, token: str) -> None:
        self.session, self.base = session, base
        self.headers = {"Authorization": f"Bearer {token}"}

    async def get(self, path: str) -> Any:
        async with self.session.get(self.base + path, headers=self.headers) as resp:
            assert resp.status == 200, (path, resp.status, await resp.text())
            return await resp.json()

    async def post(self, path: str, body: Any) -> tuple[int, Any]:
        async with self.session.post(self.base + path, json=body, headers=self.headers) as resp:
            return resp.status, await resp.json(content_type=None)

    async def trackings(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = await self.get(
                "/v1/trackings?limit=1000" + (f"&cursor={cursor}" if cursor else "")
            )
            out += page["items"]
            cursor = page["next_cursor"]
            if not cursor:
                return out

    async def events(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        after = 0
        while True:
            feed = await self.get(f"/v1/events?after={after}&limit=1000")
            if not feed["events"]:
                return out
            out += feed["events"]
            after = feed["next_after"]

    async def active_count(self) -> int:
        page = await self.get("/v1/trackings?state=active&limit=1000")
        return len(page["items"])

    async def metrics(self) -> str:
        async with self.session.get(self.base + "/metrics") as resp:
            return await resp.text()


def metric_sum(text: str, name: str, **labels: str) -> float:
    """The sum of every sample of ``name`` whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        head, _, value = line.rpartition(" ")
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            total += float(value)
    return total


@dataclass
class Plan:
    """What the simulator was scripted to do: the truth every report is checked against."""

    truth: dict[str, str] = field(default_factory=dict)  # "workspace/kind/remote_id" -> outcome
    items: list[dict[str, Any]] = field(default_factory=list)  # intake bodies

    def add(self, workspace: str, kind: str, remote_id: str, outcome: str, **extra: Any) -> None:
        self.truth[f"{workspace}/{kind}/{remote_id}"] = outcome
        body = {"kind": kind, "remote_id": remote_id, "workspace": workspace, **extra}
        self.items.append(body)


async def script(
    session: aiohttp.ClientSession, sim_url: str, kind: str, end: str, at: float
) -> str:
    """One scripted job or build: Queued, then running, then ``end`` at ``at`` seconds."""
    first = "Leased" if kind == "function_job" else "Running"
    steps: list[dict[str, Any]] = [
        {"after_s": 0, "status": "Queued"},
        {"after_s": at / 2, "status": first},
        {"after_s": at, "status": end},
    ]
    async with session.post(f"{sim_url}/_sim/script", json={"kind": kind, "steps": steps}) as resp:
        assert resp.status == 201, await resp.text()
        return str((await resp.json())["id"])


async def scripted_plan(
    session: aiohttp.ClientSession,
    sim_url: str,
    count: int,
    rng: random.Random,
    *,
    spread_s: tuple[float, float] = (0.5, 4.0),
    timeout_s: float = 90,
) -> Plan:
    plan = Plan()
    for i in range(count):
        kind = KINDS[i % 3]
        end = ENDS[kind][rng.randrange(3)]
        rid = await script(session, sim_url, kind, end, rng.uniform(*spread_s))
        plan.add("default", kind, rid, EXPECTED[end], timeout_s=timeout_s)
    return plan


async def set_faults(
    session: aiohttp.ClientSession, sim_url: str, rules: list[dict[str, Any]]
) -> None:
    async with session.put(f"{sim_url}/_sim/faults", json={"rules": rules}) as resp:
        assert resp.status == 200, await resp.text()


async def fault_hits(session: aiohttp.ClientSession, sim_url: str) -> Counter[str]:
    async with session.get(f"{sim_url}/_sim/faults") as resp:
        rules = (await resp.json())["rules"]
    hits: Counter[str] = Counter()
    for rule in rules:
        name = rule["fault"]
        if rule["fault"] == "http_5xx":
            name = f"http_{rule['status']}"
        hits[name] += rule["hits"]
    return hits


async def set_wire(
    session: aiohttp.ClientSession, sim_url: str, *, camel: bool, names: bool
) -> None:
    body = {"camel_case": camel, "enums_as_names": names}
    async with session.put(f"{sim_url}/_sim/settings", json=body) as resp:
        assert resp.status == 200, await resp.text()


async def wait_until_settled(
    client: Client, sink: Sink | None, expected_terminal: int, timeout: float
) -> None:
    """Until nothing is active and (with a sink) every terminal event has arrived."""
    async with asyncio.timeout(timeout):
        while await client.active_count():
            await asyncio.sleep(0.2)
        if sink is not None:
            while len(sink.terminal_ids()) < expected_terminal:
                await asyncio.sleep(0.2)
