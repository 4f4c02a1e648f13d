"""What the demo has seen so far, and how it is shown: live (rich) or as plain lines.

Its event sink is a webhook receiver on loopback that checks every signature as
a consumer would (docs/events.md), written independently of the service's own
signing code so that the demo would show a signing bug rather than share it. A
few first attempts are refused with 503 on purpose, to show that delivery is
at-least-once and that redeliveries keep their ``webhook-id``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import random
import re
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from rich.console import Console, Group, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from orchestrator.client import Event
from orchestrator.client import Group as GroupView
from orchestrator.client.commands import outcome_text
from orchestrator.demo.plan import Planned
from orchestrator.vocabulary import STATUS_KINDS, Outcome, PollResult

GROUP_EVENT = "com.moltaro.orchestrator.group."
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
    group_events: set[str] = field(default_factory=set)  # of them, group events

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

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/hooks", self._receive)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = next(a[1] for a in self._runner.addresses if isinstance(a, tuple))
        self.url = f"http://127.0.0.1:{port}/hooks"

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
        if b'"type":"com.moltaro.orchestrator.group.' in body:
            stats.group_events.add(msg_id)
        return web.Response(status=204)


_ANSWERS = (PollResult.OK, PollResult.NOT_FOUND)  # every other poll result is transport trouble
_POLLS = re.compile(r"^orchestrator_polls_total\{([^}]*)\} ([0-9.e+]+)$", re.M)
_ANOMALIES = re.compile(r"^orchestrator_contract_anomalies_total\{[^}]*\} ([0-9.e+]+)$", re.M)
_RESULT = re.compile(r'result="([^"]+)"')


@dataclass
class Tally:
    """Outcomes from the orchestrator's event feed, checked against the plan."""

    planned: dict[str, Planned]  # by tracking_id
    submitted: Counter[str] = field(default_factory=Counter)  # by kind
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)  # kind -> outcome
    polls: list[int] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)
    ended: set[str] = field(default_factory=set)
    as_planned: int = 0
    not_as_planned: list[str] = field(default_factory=list)
    polls_by_result: Counter[str] = field(default_factory=Counter)
    anomalies: int = 0
    cancels_asked: int = 0
    cancels_accepted: int = 0
    cancel_refusals: list[str] = field(default_factory=list)
    # The group every tracking joined: as last read, and its one event once seen.
    group: GroupView | None = None
    group_event: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        for item in self.planned.values():
            self.submitted[item.kind] += 1

    @property
    def total(self) -> int:
        return len(self.planned)

    def add(self, event: Event) -> None:
        if event.type.startswith(GROUP_EVENT):
            self.group_event = event.raw.get("data")
            return
        outcome = event.outcome
        t = event.data
        if outcome is None or t is None:
            return
        if t.tracking_id in self.ended or t.tracking_id not in self.planned:
            return
        self.ended.add(t.tracking_id)
        self.outcomes.setdefault(t.kind, Counter())[outcome] += 1
        self.polls.append(t.polls)
        failure = (t.result or {}).get("failure")
        if isinstance(failure, dict) and failure.get("reason_code"):
            self.reasons[str(failure["reason_code"])] += 1
        planned = self.planned[t.tracking_id]
        if planned.expected == outcome:
            self.as_planned += 1
        elif planned.expected is not None:
            self.not_as_planned.append(f"{planned.scenario}: {outcome}, planned {planned.expected}")

    def read_metrics(self, text: str) -> None:
        polls: Counter[str] = Counter()
        for labels, value in _POLLS.findall(text):
            found = _RESULT.search(labels)
            if found:
                polls[found.group(1)] += int(float(value))
        self.polls_by_result = polls
        self.anomalies = sum(int(float(v)) for v in _ANOMALIES.findall(text))

    def count(self, outcome: str) -> int:
        return sum(c[outcome] for c in self.outcomes.values())

    @property
    def scripted(self) -> int:
        return sum(1 for p in self.planned.values() if p.expected is not None)


def outcome_table(tally: Tally, title: str | None = None) -> Table:
    table = Table(title=title, title_justify="left", expand=False)
    table.add_column("kind")
    table.add_column("active", justify="right")
    shown = [o for o in Outcome if o != Outcome.ABANDONED or tally.count(o)]
    for outcome in shown:
        table.add_column(outcome_text(outcome), justify="right")
    table.add_column("total", justify="right")
    for kind in STATUS_KINDS:
        got = tally.outcomes.get(kind, Counter())
        active = tally.submitted[kind] - sum(got.values())
        table.add_row(kind, str(active), *(str(got[o]) for o in shown), str(tally.submitted[kind]))
    return table


def stats_line(tally: Tally, sink: SinkStats, elapsed: float) -> str:
    errors = ", ".join(
        f"{r} {n}" for r, n in sorted(tally.polls_by_result.items()) if r != PollResult.OK and n
    )
    polls = sum(tally.polls_by_result.values())
    return (
        f"polls {polls}" + (f" ({errors})" if errors else "")
        + f"\nevents delivered {sink.delivered} · redelivered {sink.redeliveries}"
        + f" · bad signatures {sink.bad_signature} · {elapsed:.1f} s"
    )  # fmt: skip


class Display:
    """A progress bar and the outcome table, redrawn in place (or plain lines)."""

    def __init__(self, console: Console, total: int, live: bool) -> None:
        self.console = console
        self.live = live
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        )
        self.task = self.progress.add_task("[bold]trackings ended", total=total)
        # The group all of them joined, as the service counts it (GET /v1/groups/...).
        self.group_task = self.progress.add_task("group", total=total)
        self._last_plain = -1.0

    def renderable(self, tally: Tally, sink: SinkStats, elapsed: float) -> RenderableType:
        self.progress.update(self.task, completed=len(tally.ended))
        g = tally.group
        if g is not None:
            self.progress.update(
                self.group_task, completed=g.terminal, total=g.total or None,
                description=f"[bold]group {g.group}[/] {g.state}",
            )  # fmt: skip
        return Group(self.progress, outcome_table(tally), stats_line(tally, sink, elapsed))

    def plain(self, tally: Tally, sink: SinkStats, elapsed: float, force: bool = False) -> None:
        if not force and elapsed - self._last_plain < 1.0:
            return
        self._last_plain = elapsed
        counts = " ".join(f"{o} {tally.count(o)}" for o in Outcome if tally.count(o))
        stamp = f"[{elapsed:5.1f}s] "
        parts = [f"{len(tally.ended)}/{tally.total} ended"] + ([counts] if counts else [])
        parts += [
            f"events delivered {sink.delivered}",
            f"polls {sum(tally.polls_by_result.values())}",
        ]
        if tally.group is not None:
            g = tally.group
            parts.append(f"group {g.group} {g.state} {g.terminal}/{g.total}")
        for line in fit(parts, self.console.width - len(stamp)):
            self.console.print(stamp + line, highlight=False, soft_wrap=True)
            stamp = " " * len(stamp)


def fit(parts: list[str], width: int, sep: str = " · ") -> list[str]:
    """``parts`` joined by ``sep`` into lines of at most ``width``, broken only between
    parts (a part longer than the line gets one of its own)."""
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + len(sep) + len(part) <= width:
            lines[-1] += sep + part
        else:
            lines.append(part)
    return lines


def summary(
    console: Console,
    tally: Tally,
    sink: SinkStats,
    elapsed: float,
    fired: dict[str, int],
    table: bool = True,
) -> None:
    """The closing report; its first lines are stable for scripts and tests to read.

    ``table=False`` when the live display's last frame already shows the outcomes.
    """
    console.print()
    if table:
        console.print(outcome_table(tally, title="Outcomes by kind"))
    trouble = ", ".join(f"{k} {v}" for k, v in sorted(fired.items())) or "none"
    seen = ", ".join(
        f"{r} {n}" for r, n in sorted(tally.polls_by_result.items()) if r not in _ANSWERS and n
    )
    lines = [
        f"trackings: {tally.total} submitted, {len(tally.ended)} reached an outcome",
        f"events: {sink.delivered} delivered ({sink.delivered - len(sink.group_events)} "
        f"tracking, {len(sink.group_events)} group), {sink.delivered} verified, "
        f"{sink.bad_signature} bad signatures; {sink.refused} refused once on purpose and "
        "redelivered with the same webhook-id",
    ]
    if tally.group_event is not None:
        g = tally.group_event
        counts = ", ".join(f"{k} {n}" for k, n in sorted(g["outcomes"].items()) if n)
        lines.append(
            f"group {g['group']}: {g['state']}, {g['members']['terminal']}/"
            f"{g['members']['total']} members ended ({counts}); one group event"
        )
    if tally.polls:
        lines.append(
            f"polls per tracking: mean {sum(tally.polls) / len(tally.polls):.1f}, "
            f"median {statistics.median(tally.polls):g}, max {max(tally.polls)}"
        )
    lines.append(
        f"transport faults injected: {trouble}; seen by the pollers: {seen or 'none'} "
        "(none of them ended a tracking)"
    )
    if tally.anomalies:
        lines.append(
            f"contract anomalies: {tally.anomalies} status reads broke the platform's documented "
            "contract (e.g. Completed without its run's evidence); none was taken as an "
            "outcome, polling went on"
        )
    if tally.reasons:
        ranked = sorted(tally.reasons.items(), key=lambda kv: (-kv[1], kv[0]))  # ties by name
        lines.append("build failure ReasonCodes: " + ", ".join(f"{k} {v}" for k, v in ranked))
    # The cancelled outcomes also count jobs and builds the simulated operators
    # cancelled on the workspace's side, so the two numbers differ on purpose.
    elsewhere = max(0, tally.count("cancelled") - tally.cancels_accepted)
    lines.append(
        f"cancels through the orchestrator: {tally.cancels_asked} asked, "
        f"{tally.cancels_accepted} accepted (202); {elsewhere} more ended "
        "cancelled by the workspace's side (simulated operators)"
        + "".join(f"; {r}" for r in tally.cancel_refusals[:3])
    )
    lines.append(f"scripted scenarios ended as planned: {tally.as_planned}/{tally.scripted}")
    lines += [f"  [yellow]not as planned[/]: {line}" for line in tally.not_as_planned[:10]]
    lines.append(f"time: {elapsed:.1f} s")
    for line in lines:
        console.print(line, highlight=False)
