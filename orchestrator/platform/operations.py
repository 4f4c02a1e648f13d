"""Reading the Function operations list routes, page by page."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.platform.wire import get_ci, list_items, text
from orchestrator.workspace.client import WorkspaceClient
from orchestrator.workspace.readresult import ReadResult

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
    seen: set[str] = set()
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
            return None, ReadResult(
                "invalid_response",
                read.http_status,
                error={"kind": "invalid_response", "message": f"{path}: not a list page"},
                duration=read.duration,
            )
        fresh = 0
        for row in items:
            key = text(row, id_field)
            if key is not None and key in seen:
                continue
            if key is not None:
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
