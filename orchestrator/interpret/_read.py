"""Tolerant readers for untrusted JSON values: each returns None instead of raising.

Moltaro bodies arrive PascalCase or camelCase, with enums as integers or names and
``null`` wherever a value may be missing, so every read goes through these.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from orchestrator.clock import parse_iso

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
# Plain decimal integers only: "2" is a status value, "2.0", "1e3" or " +2" are not.
_INT_TEXT = re.compile(r"-?[0-9]{1,18}")
_MAX_DEPTH = 64
_LABEL_MAX = 64


def get_ci(obj: Any, name: str) -> Any:
    """The value of ``name`` in a mapping, matching keys case-insensitively.

    An exact spelling wins over a case variant; ``null`` reads as absent.
    """
    if not isinstance(obj, Mapping):
        return None
    value = obj.get(name)
    if value is not None:
        return value
    wanted = name.lower()
    for key, candidate in obj.items():
        if isinstance(key, str) and key.lower() == wanted and candidate is not None:
            return candidate
    return None


def as_mapping(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def as_int(value: Any) -> int | None:
    """A 64-bit integer from an int, an integral float or a decimal string; bools are not ints."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if _INT64_MIN <= value <= _INT64_MAX else None
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and _INT64_MIN <= value <= _INT64_MAX:
            return int(value)
        return None
    if isinstance(value, str) and _INT_TEXT.fullmatch(value):
        return int(value)
    return None


def as_number(value: Any) -> float | int | None:
    """A finite JSON number (bools excluded)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if _INT64_MIN <= value <= _INT64_MAX else None
    if isinstance(value, float) and math.isfinite(value):
        return value
    return None


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def as_text(value: Any) -> str | None:
    """A string with at least one non-whitespace character."""
    return value if isinstance(value, str) and value.strip() else None


def as_bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def as_timestamp(value: Any) -> float | None:
    """Unix seconds from an ISO 8601 string, or None when it does not parse."""
    if not isinstance(value, str) or not value.strip() or len(value) > 64:
        return None
    try:
        ts = parse_iso(value)
    except (ValueError, OverflowError, OSError):
        return None
    return ts if math.isfinite(ts) else None


def label(value: Any) -> str:
    """A short printable rendering of an unexpected value, for details and fingerprints."""
    if isinstance(value, str):
        # Lone surrogates (which a lenient JSON parser lets through) would make the
        # label unencodable later; they become "?".
        return value[:_LABEL_MAX].encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, int):
        # str() of a huge int is slow and, past 4,300 digits, raises.
        return str(value) if _INT64_MIN <= value <= _INT64_MAX else "<big int>"
    if isinstance(value, float):
        return repr(value)
    return f"<{type(value).__name__}>"


def json_safe(value: Any, depth: int = 0) -> Any:
    """A copy that any JSON encoder accepts (orjson included).

    Non-finite floats become null, integers beyond 64 bits become floats (or null),
    keys become strings, and anything nested deeper than 64 levels becomes null.
    """
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if _INT64_MIN <= value <= _INT64_MAX:
            return value
        try:
            return float(value)
        except OverflowError:
            return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth >= _MAX_DEPTH:
        return None
    if isinstance(value, Mapping):
        return {
            (k if isinstance(k, str) else label(k)): json_safe(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [json_safe(v, depth + 1) for v in value]
    return None
