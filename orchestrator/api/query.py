"""Unknown query parameters are refused on every route, as unknown body fields are.

The parameters each operation accepts are read from this API's own OpenAPI
document, so that the document and the refusal cannot drift apart: a
misspelled ``?status=active`` (meaning ``state``) is a 422 problem naming
``status``, never a silent 200 that ignored it. A route missing from the
document accepts no query parameter at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from orchestrator.api.problems import Handler, invalid

Accepted = Mapping[tuple[str, str], frozenset[str]]


def accepted_queries(document: Mapping[str, Any]) -> dict[tuple[str, str], frozenset[str]]:
    """(METHOD, path template) -> the query parameters that operation declares."""
    accepted: dict[tuple[str, str], frozenset[str]] = {}
    for path, item in document["paths"].items():
        shared = item.get("parameters", [])
        for method, operation in item.items():
            if method == "parameters":
                continue
            params = [*shared, *operation.get("parameters", [])]
            names = frozenset(p["name"] for p in params if p["in"] == "query")
            accepted[(method.upper(), path)] = names
    return accepted


def query_middleware(accepted: Accepted) -> Any:
    """A middleware refusing any query parameter the route's operation does not declare."""

    @web.middleware
    async def refuse_unknown_query(request: web.Request, handler: Handler) -> web.StreamResponse:
        match = request.match_info
        if match.http_exception is None and request.query:  # no route: its 404/405 first
            method = "GET" if request.method == "HEAD" else request.method
            resource = match.route.resource
            template = resource.canonical if resource is not None else request.path
            known = accepted.get((method, template), frozenset())
            for name in request.query:
                if name not in known:
                    raise invalid(name, "unknown parameter")
        return await handler(request)

    return refuse_unknown_query
