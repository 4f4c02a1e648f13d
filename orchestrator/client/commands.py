"""``orchestrator track`` and ``orchestrator status``: the client on the command line.

Both talk to a running service: ``--server`` (else ``$ORCH_SERVER``, else
http://127.0.0.1:8080), with the bearer token from ``$ORCH_API_TOKEN``.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import aiohttp
from rich.console import Console
from rich.table import Table

from orchestrator.client.http import OrchestratorClient
from orchestrator.client.models import OrchestratorApiError, Tracking
from orchestrator.vocabulary import Outcome, TrackingState

DEFAULT_SERVER = "http://127.0.0.1:8080"

# Each outcome's ``track --wait`` exit code (documented in docs/api.md) and colour.
_OUTCOMES: dict[str, tuple[int, str]] = {
    Outcome.SUCCEEDED: (0, "green"),
    Outcome.FAILED: (1, "red"),
    Outcome.CANCELLED: (2, "yellow"),
    Outcome.DEADLINE_EXCEEDED: (3, "magenta"),
    Outcome.NOT_FOUND: (4, "bright_black"),
    Outcome.ABANDONED: (5, "bright_black"),
}
EXIT_USAGE = 10  # bad arguments, an API problem, or no service to talk to
# More than this many active trackings are counted from the first pages only.
STATUS_SCAN_LIMIT = 20_000


def server_url(explicit: str | None) -> str:
    return explicit or os.environ.get("ORCH_SERVER") or DEFAULT_SERVER


def unreachable(server: str | None, exc: BaseException) -> str:
    """What went wrong reaching the service, in words (aiohttp's own text says
    "ssl:default" even for plain http, which only misleads)."""
    url = server_url(server)
    if isinstance(exc, aiohttp.ClientConnectorError):
        error = exc.os_error
        # A negative errno is a name-resolution error, whose own text says it.
        why = os.strerror(error.errno) if error.errno and error.errno > 0 else error.strerror
        why = (why or "connection failed").lower()
        return f"cannot reach the service at {url}: {why} (is `orchestrator serve` running?)"
    if isinstance(exc, TimeoutError):
        return f"cannot reach the service at {url}: no answer in time"
    return f"cannot reach the service at {url}: {exc or type(exc).__name__}"


def _client(server: str | None) -> OrchestratorClient:
    return OrchestratorClient(server_url(server), token=os.environ.get("ORCH_API_TOKEN") or None)


def outcome_text(outcome: str | None) -> str:
    if outcome is None:
        return "-"
    return f"[{_OUTCOMES.get(outcome, (0, 'white'))[1]}]{outcome}[/]"


def detail_of(t: Tracking) -> str:
    """The one thing worth reading about how a tracking ended."""
    result = t.result or {}
    failure = result.get("failure")
    if isinstance(failure, dict) and failure.get("reason_code"):
        return f"ReasonCode {failure['reason_code']}"
    for key in ("result_summary", "last_error", "error_summary", "cancellation_reason_code"):
        if result.get(key):
            return str(result[key])[:60]
    if t.outcome == Outcome.DEADLINE_EXCEEDED:
        return f"last seen {result.get('last_remote_status') or 'nothing'}"
    if t.last_error:
        return str(t.last_error.get("kind"))
    return ""


def _clock(iso_text: str | None) -> str:
    if not iso_text:
        return "-"
    return datetime.fromisoformat(iso_text.replace("Z", "+00:00")).astimezone().strftime("%H:%M:%S")


async def track(
    console: Console,
    *,
    kind: str,
    remote_id: str | None,
    wait: bool,
    server: str | None = None,
    workspace: str = "default",
    timeout_s: float | None = None,
    poll_s: float = 0.5,
    filters: Mapping[str, Any] | None = None,
) -> int:
    """Track one id, or (trigger_work, action_work) the work ``filters`` names."""
    try:
        async with _client(server) as orch:
            tracking = await orch.track(  # intake_body leaves the None values out
                kind, remote_id, workspace=workspace, timeout_s=timeout_s, **(filters or {})
            )
            named = tracking.remote_id or _filter_text(tracking.filter)
            console.print(
                f"[bold]{tracking.tracking_id}[/]  {tracking.kind} {named} "
                f"on {tracking.workspace}: {tracking.state}"
                + (f" ({outcome_text(tracking.outcome)})" if tracking.outcome else "")
                + f", deadline {tracking.deadline_at}",
                highlight=False,
            )
            if not wait:
                return 0
            final = await _follow(console, orch, tracking, poll_s)
    except OrchestratorApiError as exc:
        console.print(
            f"[red]orchestrator: {exc}[/]" + (f" (field {exc.field})" if exc.field else "")
        )
        return EXIT_USAGE
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        console.print(f"[red]orchestrator: {unreachable(server, exc)}[/]")
        return EXIT_USAGE
    console.print(
        f"{final.tracking_id} ended as {outcome_text(final.outcome)} after {final.polls} polls"
        + (f": {detail_of(final)}" if detail_of(final) else ""),
        highlight=False,
    )
    return _OUTCOMES.get(final.outcome or "", (EXIT_USAGE, ""))[0]


def _filter_text(found: Mapping[str, Any] | None) -> str:
    """Work found by filter, before a job is seen: its filter, in a few words."""
    if not found:
        return "-"
    shown = {k: v for k, v in found.items() if v is not None and k != "since"}
    return "(" + " ".join(f"{k}={v}" for k, v in shown.items()) + ")"


async def _follow(
    console: Console, orch: OrchestratorClient, first: Tracking, poll_s: float
) -> Tracking:
    previous: list[str | None] = [None]
    said: list[object] = [None, None]  # the last next-read reason and error shown

    def changed(t: Tracking) -> None:
        if t.terminal:
            return
        news = []
        if t.next_poll_reason != said[0] and t.next_poll_reason == "not_found_confirmation":
            news.append(f"answered 404: confirming before reporting not_found (polls {t.polls})")
        said[0] = t.next_poll_reason
        if t.last_error != said[1] and t.last_error:
            error = t.last_error
            news.append(
                f"transport trouble, not an outcome: {error.get('kind')} "
                f"({error.get('message')}); reading again"
            )
        said[1] = t.last_error
        if t.remote_status is not None and t.remote_status != previous[0]:
            news.append(
                f"{previous[0] or 'tracked'} -> [cyan]{t.remote_status}[/]  (polls {t.polls})"
            )
            previous[0] = t.remote_status
        at = _clock(t.raw.get("last_polled_at"))
        for line in news:
            console.print(f"  {at}  {line}", highlight=False)
        spinner.update(f"{t.tracking_id}: {t.remote_status or 'not read yet'}, {t.polls} polls")

    with console.status(f"{first.tracking_id}: waiting for the first read") as spinner:
        return await orch.wait(first.tracking_id, poll_s=poll_s, on_change=changed)


async def status(console: Console, *, server: str | None = None, recent: int = 10) -> int:
    try:
        async with _client(server) as orch:
            counts: Counter[tuple[str, str, str]] = Counter()
            scanned = 0
            async for t in orch.list(state=TrackingState.ACTIVE, page_size=1000):
                counts[(t.workspace, t.kind, t.remote_status or "(not read yet)")] += 1
                scanned += 1
                if scanned >= STATUS_SCAN_LIMIT:
                    break
            page = await orch.list_page(state=TrackingState.TERMINAL, limit=max(50, recent * 5))
    except OrchestratorApiError as exc:
        console.print(f"[red]orchestrator: {exc}[/]")
        return EXIT_USAGE
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        console.print(f"[red]orchestrator: {unreachable(server, exc)}[/]")
        return EXIT_USAGE

    active = Table(title=f"Active trackings at {server_url(server)}", title_justify="left")
    for name in ("workspace", "kind", "remote status", "count"):
        active.add_column(name, justify="right" if name == "count" else "left")
    for (workspace, kind, remote_status), n in sorted(counts.items()):
        active.add_row(workspace, kind, remote_status, str(n))
    more = "+" if scanned >= STATUS_SCAN_LIMIT else ""
    active.add_section()
    active.add_row("[bold]total[/]", "", "", f"[bold]{scanned}{more}[/]")
    console.print(active)

    ended = sorted(page.items, key=lambda t: t.terminal_at or "", reverse=True)[:recent]
    table = Table(title="Recent outcomes", title_justify="left")
    for name in ("ended", "tracking", "kind", "remote id", "outcome", "polls", "detail"):
        table.add_column(name, justify="right" if name == "polls" else "left")
    for t in ended:
        table.add_row(
            _clock(t.terminal_at),
            t.tracking_id,
            t.kind,
            t.remote_id or _filter_text(t.filter),
            outcome_text(t.outcome),
            str(t.polls),
            detail_of(t),
        )
    if not ended:
        table.add_row("-", "nothing has ended yet", "", "", "", "", "")
    console.print(table)
    return 0
