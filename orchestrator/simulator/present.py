"""Bodies as the wire shows them: PascalCase or camelCase, enums as integers or names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

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

# Enum-typed properties by body kind: (property, nested property or None, enum).
ENUM_FIELDS: dict[str, tuple[tuple[str, str | None, WireEnum], ...]] = {
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

    @property
    def plain(self) -> bool:
        return not self.camel_case and not self.enums_as_names


def _camel(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            (k[:1].lower() + k[1:]): (v if k in _OPAQUE else _camel(v)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return value


def _named(body: dict[str, Any], kind: str) -> dict[str, Any]:
    out = dict(body)
    for prop, nested, enum in ENUM_FIELDS[kind]:
        if nested is None:
            value = out.get(prop)
            if isinstance(value, int) and not isinstance(value, bool):
                out[prop] = enum.name(value) if enum.has(value) else value
        elif isinstance(out.get(prop), dict):
            out[prop] = _named_one(out[prop], nested, enum)
    return out


def _named_one(body: dict[str, Any], prop: str, enum: WireEnum) -> dict[str, Any]:
    out = dict(body)
    value = out.get(prop)
    if isinstance(value, int) and not isinstance(value, bool) and enum.has(value):
        out[prop] = enum.name(value)
    return out


def present(body: dict[str, Any], kind: str, settings: Settings) -> dict[str, Any]:
    if settings.enums_as_names:
        body = _named(body, kind)
    if settings.camel_case:
        body = _camel(body)
    return body


def present_list(
    items: list[dict[str, Any]], kind: str, settings: Settings, total: int | None = None
) -> dict[str, Any]:
    page = {
        "Items": [present(i, kind, settings) for i in items],
        "Total": len(items) if total is None else total,
    }
    return _camel(page) if settings.camel_case else page


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=orjson.dumps(data), status=status, headers=headers, content_type="application/json"
    )


def problem(
    status: int, detail: str, headers: dict[str, str] | None = None, **extra: Any
) -> web.Response:
    title, type_ = _TYPES.get(status, ("Error", "about:blank"))
    body = {"type": type_, "title": title, "status": status, "detail": detail, **extra}
    return web.Response(
        body=orjson.dumps(body),
        status=status,
        headers=headers,
        content_type="application/problem+json",
    )
