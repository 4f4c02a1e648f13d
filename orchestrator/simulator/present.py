"""The wire both ways: requests read strictly (anything malformed is a 400, never a
500), and bodies answered as the wire shows them (PascalCase or camelCase, enums as
integers or names)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from orchestrator.clock import parse_iso
from orchestrator.simulator.enums import (
    BINDING_SOURCE,
    CONTRACT,
    JOB_SOURCE,
    JOB_STATUS,
    NET_BUILD_KIND,
    NET_BUILD_STATUS,
    PUBLICATION_KIND,
    RUN_STATUS,
    UI_BUILD_KIND,
    UI_BUILD_STATUS,
    WireEnum,
)
from orchestrator.simulator.model import Build, Job

# Enum-typed properties by body kind: (property, nested property or None, enum).
_EnumField = tuple[str, str | None, WireEnum]
ENUM_FIELDS: dict[str, tuple[_EnumField, ...]] = {
    "job": (
        ("Status", None, JOB_STATUS),
        ("Source", None, JOB_SOURCE),
        ("Run", "Status", RUN_STATUS),
    ),
    "run": (("Status", None, RUN_STATUS), ("Source", None, JOB_SOURCE)),
    "net": (("Status", None, NET_BUILD_STATUS), ("Kind", None, NET_BUILD_KIND)),
    "ui": (("Status", None, UI_BUILD_STATUS), ("Kind", None, UI_BUILD_KIND)),
    "function": (("CurrentPublishedContract", None, CONTRACT),),
    "binding": (("Source", None, BINDING_SOURCE),),
    "publication": (("Kind", None, PUBLICATION_KIND),),
    "schedule": (),
    "record": (),
}
_OPAQUE = frozenset({"ResultData"})  # user data: its keys are never renamed

_TYPES = {
    400: ("Bad Request", "https://tools.ietf.org/html/rfc9110#section-15.5.1"),
    404: ("Not Found", "https://tools.ietf.org/html/rfc9110#section-15.5.5"),
    405: ("Method Not Allowed", "https://tools.ietf.org/html/rfc9110#section-15.5.6"),
    409: ("Conflict", "https://tools.ietf.org/html/rfc9110#section-15.5.10"),
    413: ("Content Too Large", "https://tools.ietf.org/html/rfc9110#section-15.5.14"),
    415: ("Unsupported Media Type", "https://tools.ietf.org/html/rfc9110#section-15.5.16"),
    429: ("Too Many Requests", "https://tools.ietf.org/html/rfc6585#section-4"),
    500: ("Internal Server Error", "https://tools.ietf.org/html/rfc9110#section-15.6.1"),
    503: ("Service Unavailable", "https://tools.ietf.org/html/rfc9110#section-15.6.4"),
}


@dataclass(slots=True)
class Settings:
    camel_case: bool = False
    enums_as_names: bool = False
    version: int = 0  # bumped on change: cached bodies of an older version are stale


def _camel(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            (k[:1].lower() + k[1:]): (v if k in _OPAQUE else _camel(v)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return value


def _named(body: dict[str, Any], fields: tuple[_EnumField, ...]) -> dict[str, Any]:
    out = dict(body)
    for prop, nested, enum in fields:
        value = out.get(prop)
        if nested is not None:
            if isinstance(value, dict):
                out[prop] = _named(value, ((nested, None, enum),))
        elif isinstance(value, int) and not isinstance(value, bool) and enum.has(value):
            out[prop] = enum.name(value)
    return out


def present(body: dict[str, Any], kind: str, settings: Settings) -> dict[str, Any]:
    if settings.enums_as_names:
        body = _named(body, ENUM_FIELDS[kind])
    if settings.camel_case:
        body = _camel(body)
    return body


def present_view(record: Job | Build, kind: str, settings: Settings, now: float) -> dict[str, Any]:
    """What ``record`` shows at ``now`` as the wire shows it (``{}`` while not visible)."""
    view = record.view(now)
    return {} if view is None else present(view.body, kind, settings)


def present_list(
    items: list[dict[str, Any]], kind: str, settings: Settings, total: int | None = None
) -> dict[str, Any]:
    page = {
        "Items": [present(i, kind, settings) for i in items],
        "Total": len(items) if total is None else total,
    }
    return _camel(page) if settings.camel_case else page


def json_response(
    data: Any,
    status: int = 200,
    headers: dict[str, str] | None = None,
    content_type: str = "application/json",
) -> web.Response:
    return web.Response(
        body=orjson.dumps(data), status=status, headers=headers, content_type=content_type
    )


def problem(
    status: int, detail: str, headers: dict[str, str] | None = None, **extra: Any
) -> web.Response:
    title, type_ = _TYPES.get(status, ("Error", "about:blank"))
    body = {"type": type_, "title": title, "status": status, "detail": detail, **extra}
    return json_response(body, status, headers, "application/problem+json")


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
    return next((value for key, value in body.items() if key.lower() == lowered), None)


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


def parse_enum(enum: WireEnum, raw: object, name: str) -> int:
    """``raw`` as one of ``enum``'s values (an integer or a name), or a 400."""
    value = enum.parse(raw)
    if value is None:
        raise BadRequest(f"{name} must be one of {[n for n, _ in enum.members]}.")
    return value


def query(request: web.Request, name: str) -> str | None:
    """A query parameter, matched case-insensitively; an empty value counts as absent."""
    value = request.query.get(name)
    if value is None:
        lowered = name.lower()
        value = next((v for key, v in request.query.items() if key.lower() == lowered), None)
    return value if value else None


def query_time(request: web.Request, name: str) -> float | None:
    text = query(request, name)
    if text is None:
        return None
    try:
        return parse_iso(text)
    except (ValueError, OverflowError):
        raise BadRequest(f"{name} must be an ISO 8601 timestamp.") from None


def query_limit(request: web.Request, name: str) -> int:
    """A list's page size: 50 unless the query asks for 1 to 1000."""
    text = query(request, name)
    if text is None:
        return 50
    if not text.isdigit() or not 1 <= int(text) <= 1000:
        raise BadRequest(f"{name} must be an integer from 1 to 1000.")
    return int(text)
