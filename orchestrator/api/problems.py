"""RFC 9457 problem responses for everything the API refuses, the bearer-token guard
of every ``/v1`` route, and the JSON in and out of the handlers."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
from aiohttp import web
from pydantic import BaseModel, ValidationError

from orchestrator.errors import ApiProblem, StoreUnavailable
from orchestrator.runtime import RUNTIME

log = logging.getLogger("orchestrator.api")

PROBLEM_JSON = "application/problem+json"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Model = TypeVar("Model", bound=BaseModel)


def problem_response(problem: ApiProblem) -> web.Response:
    return web.Response(
        body=orjson.dumps(problem.to_body()),
        status=problem.status,
        content_type=PROBLEM_JSON,
        headers=problem.headers,
    )


def invalid(
    field: str, message: str, status: int = 422, title: str = "Invalid request"
) -> ApiProblem:
    """A refusal naming ``field``, its detail ``field: message``."""
    return ApiProblem(status, title, f"{field}: {message}", field=field)


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


async def read_json(request: web.Request) -> Any:
    ctype = request.content_type
    if ctype != "application/json" and not ctype.endswith("+json"):
        raise ApiProblem(
            415,
            "Unsupported media type",
            "Content-Type must be application/json",
            field="Content-Type",
        )
    try:
        return orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        raise ApiProblem(
            400, "Malformed JSON", "the body is not valid JSON", field="body"
        ) from None


def validated(model: type[Model], raw: Any, object_only: bool = True) -> Model:
    """``raw`` as ``model``, else a problem naming the field of the first error (dotted
    path); ``object_only``: anything but a JSON object is refused as such."""
    if object_only and not isinstance(raw, dict):
        raise invalid("body", "must be a JSON object")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(p) for p in err.get("loc", ())]
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        # Model-level checks name their field at the start of the message.
        if not loc and ": " in msg:
            head, _, msg = msg.partition(": ")
            loc = [head]
        if err.get("type") == "extra_forbidden":
            msg = "unknown field"
        raise invalid(".".join(loc) if loc else "body", msg) from None


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
    except ApiProblem as refused:
        problem = refused
    except StoreUnavailable:
        problem = ApiProblem(
            503,
            "Store unavailable",
            "the store cannot write right now; nothing was acknowledged",
            headers={"Retry-After": "5"},
        )
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        too_large = exc.status == 413
        allow = exc.headers.get("Allow")
        problem = ApiProblem(
            exc.status,
            _HTTP_TITLES.get(exc.status, exc.reason),
            "the body exceeds server.max_body_bytes" if too_large else None,
            field="body" if too_large else None,
            headers={"Allow": allow} if allow else None,
        )
    except Exception:
        log.exception("unhandled error in %s %s", request.method, request.path)
        problem = ApiProblem(500, "Internal error")
    return problem_response(problem)


def token_ok(header: str | None, tokens: frozenset[str]) -> bool:
    if not header:
        return False
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token or token != token.strip():
        return False
    # Compare against every token (a list, not a generator that any() would cut
    # short) so that timing does not tell which one matched.
    return any([hmac.compare_digest(token.encode(), candidate.encode()) for candidate in tokens])


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path == "/v1" or request.path.startswith("/v1/"):
        tokens = request.app[RUNTIME].api_tokens
        if tokens and not token_ok(request.headers.get("Authorization"), tokens):
            return problem_response(
                ApiProblem(
                    401,
                    "Unauthorized",
                    "a valid bearer token is required",
                    headers={"WWW-Authenticate": 'Bearer realm="orchestrator"'},
                )
            )
    return await handler(request)
