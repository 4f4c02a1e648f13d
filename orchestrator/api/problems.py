"""RFC 9457 problem responses for everything the API refuses."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web
from pydantic import ValidationError

from orchestrator.errors import ApiProblem, StoreUnavailable

log = logging.getLogger("orchestrator.api")

PROBLEM_JSON = "application/problem+json"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def problem_response(problem: ApiProblem) -> web.Response:
    return web.Response(
        body=orjson.dumps(problem.to_body()),
        status=problem.status,
        content_type=PROBLEM_JSON,
        headers=problem.headers,
    )


def from_validation_error(exc: ValidationError, prefix: str = "") -> ApiProblem:
    """The first error, naming the field it concerns (dotted path)."""
    err = exc.errors()[0]
    loc = [str(p) for p in err.get("loc", ())]
    msg = str(err.get("msg", "invalid"))
    # Model-level checks name their field at the start of the message.
    if not loc and ": " in msg:
        head, _, rest = msg.partition(": ")
        if head.startswith("Value error, "):
            head = head[len("Value error, ") :]
        loc, msg = [head], rest
    field = prefix + ".".join(loc) if loc else (prefix.rstrip(".") or "body")
    msg = msg.removeprefix("Value error, ")
    if err.get("type") == "extra_forbidden":
        msg = "unknown field"
    return ApiProblem(422, "Invalid request", f"{field}: {msg}", field=field)


# The answers about a request made to the workspace for the caller
# (``orchestrator.workspace.forwarded``); a 409 takes the route's own title.
_FORWARDED_TITLES = {
    404: "Not found",
    422: "Refused by the workspace",
    502: "Workspace error",
    503: "Workspace busy",
    504: "Workspace timeout",
}


def forwarded_problem(
    status: int,
    detail: str,
    conflict_title: str,
    extra: dict[str, Any],
    retry_after: float | None = None,
    field: str | None = None,
) -> ApiProblem:
    """The problem answering a forwarded request the workspace did not carry out."""
    title = conflict_title if status == 409 else _FORWARDED_TITLES.get(status, "Workspace error")
    headers = {} if retry_after is None else {"Retry-After": str(max(1, round(retry_after)))}
    return ApiProblem(status, title, detail, field=field, extra=extra, headers=headers)


_HTTP_TITLES = {
    404: "Not found",
    405: "Method not allowed",
    413: "Request body too large",
}


@web.middleware
async def problem_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiProblem as problem:
        return problem_response(problem)
    except StoreUnavailable:
        return problem_response(
            ApiProblem(
                503,
                "Store unavailable",
                "the store cannot write right now; nothing was acknowledged",
                headers={"Retry-After": "5"},
            )
        )
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        title = _HTTP_TITLES.get(exc.status, exc.reason)
        detail = None
        field = None
        if exc.status == 413:
            detail = "the body exceeds server.max_body_bytes"
            field = "body"
        return problem_response(
            ApiProblem(exc.status, title, detail, field=field, headers=_allow(exc))
        )
    except Exception:
        log.exception("unhandled error in %s %s", request.method, request.path)
        return problem_response(ApiProblem(500, "Internal error"))


def _allow(exc: web.HTTPException) -> dict[str, str]:
    allow = exc.headers.get("Allow")
    return {"Allow": allow} if allow else {}
