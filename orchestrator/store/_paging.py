"""Opaque cursors and limits, shared by every backend so that paging behaves alike."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import orjson

from orchestrator.errors import StoreError

MAX_PAGE = 1000


class InvalidCursor(StoreError, ValueError):
    """The paging cursor was not produced by this store (the API answers 400)."""


def clamp_limit(limit: int) -> int:
    return max(1, min(int(limit), MAX_PAGE))


def encode_cursor(*key: Any) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(list(key))).decode("ascii").rstrip("=")


def decode_cursor(cursor: str, types: tuple[type, ...]) -> tuple[Any, ...]:
    """The key a cursor was made from; InvalidCursor when it was not made by encode_cursor."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = orjson.loads(raw)
    except (binascii.Error, ValueError, orjson.JSONDecodeError) as exc:
        raise InvalidCursor(f"invalid cursor: {cursor!r}") from exc
    if not isinstance(key, list) or len(key) != len(types):
        raise InvalidCursor(f"invalid cursor: {cursor!r}")
    values: list[Any] = []
    for value, kind in zip(key, types, strict=True):
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise InvalidCursor(f"invalid cursor: {cursor!r}")
        values.append(value)
    return tuple(values)
