"""Tolerant readers for the administrative bodies (lists, enums, timestamps)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.interpret._read import as_int, as_timestamp, get_ci

__all__ = ["as_timestamp", "enum_name", "get_ci", "list_items", "text"]


def list_items(body: Any) -> list[Mapping[str, Any]] | None:
    """The rows of an ``{"Items": [...], "Total": N}`` page (or of a bare list).

    None when the body is neither; rows that are not objects are dropped.
    """
    items = body if isinstance(body, list) else get_ci(body, "Items")
    if not isinstance(items, list):
        return None
    return [row for row in items if isinstance(row, Mapping)]


def text(row: Any, name: str) -> str | None:
    value = get_ci(row, name)
    return value if isinstance(value, str) and value != "" else None


def enum_name(raw: Any, values: Mapping[int, str]) -> str | None:
    """The name of an enum value that arrived as an integer or as a name.

    A name is matched case-insensitively against the known names and returned
    in their spelling; an unknown name is returned as it came (the wire may know
    more members than the document); an unknown integer is None.
    """
    if isinstance(raw, str) and not raw.strip().lstrip("-").isdigit():
        folded = raw.strip().lower()
        for name in values.values():
            if name.lower() == folded:
                return name
        return raw.strip() or None
    number = as_int(raw)
    return values.get(number) if number is not None else None
