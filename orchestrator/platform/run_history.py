"""Reading the Function operations list routes, and the attempts (runs) of a
finished function job, for its terminal result.

A job describes delivery and worker state; a run is one actual execution and
its business outcome. With one attempt the status model's own ``Run`` is the
whole history, and nothing more is read. With more, the runs are read from
Function operations, filtered by the job's function and its own window
(CreatedAt to CompletedAt), keeping the rows whose JobId is this job; jobs of
one function that finish together share one read. Reading them never changes
the outcome: on any failure ``attempts`` is null and ``attempts_error`` says why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.interpret._read import get_ci, list_items, run_fields, text, whole
from orchestrator.vocabulary import Kind
from orchestrator.workspace.client import WorkspaceClient
from orchestrator.workspace.readresult import ReadResult, invalid, trouble

_KIND = Kind.FUNCTION_JOB
Attempts = tuple[list[dict[str, Any]] | None, str | None]
Row = Mapping[str, Any]

MAX_PAGES = 10


async def read_rows(
    client: WorkspaceClient,
    route: str,
    filters: Mapping[str, str],
    id_field: str,
    time_field: str,
) -> tuple[list[Row] | None, ReadResult]:
    """Every row matching ``filters`` (at most MAX_PAGES pages), or None and the failed read.

    ``route`` is ``function_jobs`` or ``function_runs``; ``filters`` are keyed by
    our filter names (``schedule_id``, ``from``, ...) and sent under the names the
    workspace's OpenAPI document declares (``client.filters``). The routes answer
    newest first with a ``limit``; when ``Total`` says more matched, the next
    page asks for rows up to (``to``) the oldest one seen. Rows are
    de-duplicated by ``id_field`` (a page boundary repeats its instant).
    """
    rows: list[Row] = []
    seen: set[str | None] = set()
    upper: str | None = None
    read = ReadResult("ok")
    page_size = client.cfg.list_page_size
    path = getattr(client.cfg.paths, route)
    for _ in range(MAX_PAGES):
        wanted = {**filters, "limit": str(page_size)}
        if upper is not None:
            wanted["to"] = upper
        params = client.filters.query(route, wanted)
        read = await client.call("GET", path, query=params)
        if read.result != "ok":
            return None, read
        items = list_items(read.body)
        if items is None:
            return None, invalid(read, f"{path}: not a list page")
        fresh = 0
        for row in items:
            key = text(row, id_field)
            if key in seen:
                continue
            if key is not None:  # a row without an id is never a repeat
                seen.add(key)
            rows.append(row)
            fresh += 1
        total = get_ci(read.body, "Total")
        if not isinstance(total, int) or len(rows) >= total or len(items) < page_size:
            break
        times = [t for t in (text(r, time_field) for r in items) if t is not None]
        if not fresh or not times:
            break
        upper = min(times)
    return rows, read


def attempts_from_runs(
    job_id: str, runs: list[Mapping[str, Any]], run_status: Mapping[int, str]
) -> list[dict[str, Any]]:
    """This job's runs, by attempt, in the shape the result carries them."""
    out = [run_fields(r, run_status, "status") for r in runs if text(r, "JobId") == job_id]
    out.sort(
        key=lambda a: (a["attempt"] if isinstance(a["attempt"], int) else 0, a["started_at"] or "")
    )
    return out


@dataclass(slots=True)
class _Read:
    """One list read shared by the jobs of one function that finish together."""

    start: str
    end: str | None
    done: asyncio.Future[tuple[list[Row] | None, ReadResult]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    sent: bool = False


class RunHistory:
    def __init__(self, on_read: Callable[[str, str], None]) -> None:
        """``on_read(workspace, result)`` counts each list read made."""
        self._on_read = on_read
        self._open: dict[tuple[str, str], _Read] = {}

    async def attach(
        self, client: WorkspaceClient, job_id: str, body: Any, result: dict[str, Any] | None
    ) -> dict[str, Any]:
        """``result`` plus ``attempts`` (or ``attempts: null`` and ``attempts_error``)."""
        try:
            attempts, error = await self._attempts(client, job_id, body)
        except Exception as exc:
            attempts, error = None, f"run history unreadable: {type(exc).__name__}"
        return {**(result or {}), "attempts": attempts, "attempts_error": error}

    async def _attempts(self, client: WorkspaceClient, job_id: str, body: Any) -> Attempts:
        model = get_ci(body, "Data") if get_ci(body, "JobId") is None else body
        run_status = client.enums[_KIND].values.get("run.status", {})
        current = whole(get_ci(model, "CurrentAttempt"))
        if current is None or current <= 1:
            run = get_ci(model, "Run")
            return (
                [run_fields(run, run_status, "status")] if isinstance(run, Mapping) else []
            ), None
        function_id = text(model, "BusinessFunctionId") or text(model, "FunctionKey")
        created = text(model, "CreatedAt")
        if function_id is None or created is None:
            return None, "the job carries no BusinessFunctionId or CreatedAt to filter runs by"
        if client.gate.blocked_for() > 0:
            return None, "the workspace asked us to wait (Retry-After)"
        runs, read = await self._shared_read(
            client, function_id, created, text(model, "CompletedAt")
        )
        if runs is None:
            status = f"HTTP {read.http_status}" if read.http_status is not None else read.result
            return None, f"GET {client.cfg.paths.function_runs} failed: {status}"
        attempts = attempts_from_runs(job_id, list(runs), run_status)
        if len(attempts) < current:
            return attempts, f"found {len(attempts)} of {current} runs"
        return attempts, None

    async def _shared_read(
        self, client: WorkspaceClient, function_id: str, start: str, end: str | None
    ) -> tuple[list[Row] | None, ReadResult]:
        key = (client.name, function_id)
        shared = self._open.get(key)
        if shared is not None and not shared.sent:
            # Joins the read about to go out: its window grows to cover this job.
            shared.start = min(shared.start, start)
            shared.end = None if shared.end is None or end is None else max(shared.end, end)
            return await asyncio.shield(shared.done)
        shared = self._open[key] = _Read(start, end)
        try:
            await asyncio.sleep(0)  # the other jobs finishing in this turn join it
            shared.sent = True
            query = {"function_id": function_id, "from": shared.start}
            if shared.end is not None:
                query["to"] = shared.end
            answer = await read_rows(client, "function_runs", query, "RunId", "StartedAt")
            self._on_read(client.name, answer[1].result)
        except BaseException:
            answer = (None, trouble("connection", "run history read cut off", 0.0))
            raise
        finally:
            if self._open.get(key) is shared:
                del self._open[key]
            if not shared.done.done():
                shared.done.set_result(answer)
        return answer
