"""Bearer-token guard of every ``/v1`` route."""

from __future__ import annotations

import hmac

from aiohttp import web

from orchestrator.api.problems import Handler, problem_response
from orchestrator.errors import ApiProblem
from orchestrator.runtime import RUNTIME


def token_ok(header: str | None, tokens: frozenset[str]) -> bool:
    if not header:
        return False
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token or token != token.strip():
        return False
    # Compare against every token so timing does not tell which one matched.
    matched = False
    for candidate in tokens:
        matched |= hmac.compare_digest(token.encode(), candidate.encode())
    return matched


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
