"""Reading the execution-model inputs from a workspace, then explaining a key.

Each call reads the catalog, the binding summaries, the API publications, the
schedules and the OpenAPI document afresh: discovery is an occasional,
human-paced question, and the catalog changes with every Build.
"""

from __future__ import annotations

import asyncio
from typing import Any

from orchestrator.errors import OrchestratorError
from orchestrator.interpret._read import list_items
from orchestrator.interpret.enums import resolve_platform_enums
from orchestrator.platform.execution_model import CatalogSnapshot, explain
from orchestrator.workspace.client import WorkspaceClient
from orchestrator.workspace.forwarded import failure
from orchestrator.workspace.readresult import ReadResult

_LISTS = ("function_catalog", "binding_summaries", "api_functions", "function_schedules")


class DiscoveryError(OrchestratorError):
    """A catalog route of the workspace could not be read.

    ``failure``: how the caller is told (``workspace.forwarded``); the request
    carried nothing of the caller's, so a refusal of it is the workspace's error.
    """

    def __init__(self, route: str, read: ReadResult, secret: str | None = None) -> None:
        status = f"HTTP {read.http_status}" if read.http_status is not None else read.result
        super().__init__(f"GET {route} failed: {status}")
        self.route = route
        self.read = read
        self.failure = failure(read, f"GET {route}", secret, command=False)


async def read_snapshot(client: WorkspaceClient) -> CatalogSnapshot:
    """All four lists and the enums; raises DiscoveryError when a list cannot be read."""
    paths = client.cfg.paths.model_dump()
    reads = await asyncio.gather(
        *(client.call("GET", paths[name]) for name in _LISTS),
        client.call("GET", client.cfg.openapi_path),
    )
    rows: dict[str, list[Any]] = {}
    for name, read in zip(_LISTS, reads, strict=False):
        items = list_items(read.body) if read.result == "ok" else None
        if items is None:
            if read.result == "ok":
                read = ReadResult("invalid_response", read.http_status, read.body)
            raise DiscoveryError(paths[name], read, client.token)
        rows[name] = items
    doc_read = reads[-1]
    document = doc_read.body if doc_read.result == "ok" else None
    why = None
    if document is None:
        status = doc_read.http_status if doc_read.http_status is not None else doc_read.result
        why = f"GET {client.cfg.openapi_path} failed: {status}"
    enums = resolve_platform_enums(document, paths, why)
    return CatalogSnapshot(
        functions=rows["function_catalog"],
        bindings=rows["binding_summaries"],
        publications=rows["api_functions"],
        schedules=rows["function_schedules"],
        enums=enums,
    )


async def execution_model(client: WorkspaceClient, function_key: str) -> dict[str, Any] | None:
    """The decision-table answer for ``function_key`` (None: the catalog does not list it)."""
    snapshot = await read_snapshot(client)
    answer = explain(function_key, snapshot)
    if answer is not None:
        answer["workspace"] = client.name
    return answer
