"""Reading request bodies and query strings strictly: anything malformed is a 400, never a 500."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from orchestrator.clock import parse_iso


class BadRequest(Exception):
    """The request is malformed; answered 400 with this detail."""


async def read_object(request: web.Request, *, required: bool = False) -> dict[str, Any]:
    """The JSON object body (an empty body is ``{}`` unless ``required``)."""
    raw = await request.read()
    if not raw.strip():
        if required:
            raise BadRequest("A JSON object body is required.")
        return {}
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise BadRequest("The body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise BadRequest("The body must be a JSON object.")
    return body


def field(body: dict[str, Any], name: str) -> Any:
    """A body field matched case-insensitively, as ASP.NET model binding does."""
    if name in body:
        return body[name]
    lowered = name.lower()
    for key, value in body.items():
        if key.lower() == lowered:
            return value
    return None


def opt_str(body: dict[str, Any], name: str, max_len: int = 200) -> str | None:
    value = field(body, name)
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= max_len:
        raise BadRequest(f"{name} must be a string of 1-{max_len} characters or null.")
    return value


def opt_bool(body: dict[str, Any], name: str) -> bool | None:
    value = field(body, name)
    if value is not None and not isinstance(value, bool):
        raise BadRequest(f"{name} must be a boolean.")
    return value


def query(request: web.Request, name: str) -> str | None:
    """A query parameter, matched case-insensitively; an empty value counts as absent."""
    value = request.query.get(name)
    if value is None:
        lowered = name.lower()
        for key, v in request.query.items():
            if key.lower() == lowered:
                value = v
                break
    return value if value else None


def query_time(request: web.Request, name: str) -> float | None:
    text = query(request, name)
    if text is None:
        return None
    try:
        return parse_iso(text)
    except (ValueError, OverflowError):
        raise BadRequest(f"{name} must be an ISO 8601 timestamp.") from None


def query_limit(
    request: web.Request, default: int = 50, maximum: int = 1000, name: str = "Limit"
) -> int:
    text = query(request, name)
    if text is None:
        return default
    if not text.isdigit() or not 1 <= int(text) <= maximum:
        raise BadRequest(f"{name} must be an integer from 1 to {maximum}.")
    return int(text)
