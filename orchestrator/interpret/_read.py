"""Tolerant readers for untrusted JSON values: each returns None instead of raising.

Moltaro bodies (status models and the administrative lists alike) arrive
PascalCase or camelCase, with enums as integers or names and ``null`` wherever a
value may be missing, so every read goes through these.

Intake's reading of the raw body Moltaro returned on enqueue or build submission
is here too. The polling URL in such a body is input, so it is never followed:
it is only checked against the route the workspace's configuration already
names. The check is deliberately narrower than URL equivalence: anything a
legitimate Moltaro ``StatusUrl`` would not contain (percent-escapes, queries,
fragments, userinfo, backslashes) is refused rather than normalised.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import SplitResult, urlsplit

from orchestrator.clock import parse_iso

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
# Plain decimal integers only: "2" is a status value, "2.0", "1e3" or " +2" are not.
_INT_TEXT = re.compile(r"-?[0-9]{1,18}")
_MAX_DEPTH = 64
_LABEL_MAX = 64
TERMINAL_JOB = ("Completed", "Failed", "Cancelled")
_ID_FIELDS = ("JobId", "Id")
_URL_FIELDS = ("StatusUrl", "PollingUrl", "Url", "Location")
_REMOTE_ID = re.compile(r"[A-Za-z0-9._:-]{1,200}")
# Every character a route, an id, a host, an IP literal or a port can need; '%',
# '?', '#', '@', '\' and whitespace are absent on purpose.
_URL_CHARS = re.compile(r"[A-Za-z0-9._~:/\[\]-]{1,2048}")
_DEFAULT_PORTS = {"http": 80, "https": 443}


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


def model_of(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """The status model: the body itself, or its ``Data`` when it is an envelope."""
    if get_ci(body, "Status") is None:
        data = get_ci(body, "Data")
        if isinstance(data, Mapping):
            return data
    return body


def whole(value: Any) -> int | None:
    """An integer as received (bools are not integers)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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


def as_id(value: Any) -> str | None:
    """An id as received: a string, or a 64-bit integer as its decimal text."""
    if isinstance(value, str):
        return value
    number = as_int(value) if isinstance(value, int) else None
    return None if number is None else str(number)


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


def text(row: Any, name: str) -> str | None:
    """A non-empty string member of a row."""
    value = get_ci(row, name)
    return value if isinstance(value, str) and value != "" else None


def list_items(body: Any) -> list[Mapping[str, Any]] | None:
    """The rows of an ``{"Items": [...], "Total": N}`` page (or of a bare list).

    None when the body is neither; rows that are not objects are dropped.
    """
    items = body if isinstance(body, list) else get_ci(body, "Items")
    if not isinstance(items, list):
        return None
    return [row for row in items if isinstance(row, Mapping)]


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


def latest_run(runs: Sequence[Mapping[str, Any]], job: Any = None) -> Mapping[str, Any] | None:
    """The run of the highest Attempt (then the latest StartedAt), else the job's own ``Run``."""
    if runs:
        return max(runs, key=_run_order)
    embedded = get_ci(job, "Run")
    return embedded if isinstance(embedded, Mapping) else None


def _run_order(run: Mapping[str, Any]) -> tuple[int, str]:
    attempt = whole(get_ci(run, "Attempt"))
    return (-1 if attempt is None else attempt, text(run, "StartedAt") or "")


def run_fields(
    run: Any, run_status: Mapping[int, str], status_key: str = "run_status"
) -> dict[str, Any]:
    """A run row as results and occurrences carry it (every field None without a run)."""
    pair = {
        status_key: enum_name(get_ci(run, "Status"), run_status),
        "attempt": get_ci(run, "Attempt"),
    }
    # The documented orders: an occurrence's run_status before attempt, an attempt's after.
    if status_key == "status":
        pair = dict(reversed(pair.items()))
    return {
        "run_id": text(run, "RunId"),
        **pair,
        "started_at": text(run, "StartedAt"),
        "completed_at": text(run, "CompletedAt"),
        "duration_ms": get_ci(run, "DurationMs"),
        "result_summary": text(run, "ResultSummary"),
        "error_summary": text(run, "ErrorSummary"),
    }


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


def extract_remote_id(enqueue_response: Any) -> str | None:
    """The id in ``JobId`` or else ``Id``, top level or under ``Data``, case-insensitively.

    The value is returned as received (an integer as its decimal text); intake
    validates its form.
    """
    return _first(enqueue_response, _ID_FIELDS, as_id)


def extract_polling_url(enqueue_response: Any) -> str | None:
    """The first of ``StatusUrl``, ``PollingUrl``, ``Url``, ``Location`` (top level, then Data)."""
    return _first(enqueue_response, _URL_FIELDS, as_text)


def _first(body: Any, names: tuple[str, ...], read: Callable[[Any], str | None]) -> str | None:
    """The first non-empty ``read`` of ``names``, each at the top level then under Data."""
    top = as_mapping(body)
    data = as_mapping(get_ci(top, "Data"))
    for name in names:
        for level in (top, data):
            value = read(get_ci(level, name))
            if value:
                return value
    return None


def polling_url_matches(url: str, base_url: str, route_template: str, remote_id: str) -> bool:
    """True only when ``url`` names exactly the configured route for ``remote_id``.

    ``url`` is either a path starting with a single ``/`` or an absolute URL with
    the base URL's scheme, host and port (default ports included) and no userinfo;
    either way its path must equal the base URL's path followed by the route with
    ``{id}`` replaced. Never raises.
    """
    try:
        return _matches(url, base_url, route_template, remote_id)
    except (ValueError, TypeError):
        return False


def _matches(url: Any, base_url: Any, route_template: Any, remote_id: Any) -> bool:
    if not all(isinstance(v, str) for v in (url, base_url, route_template, remote_id)):
        return False
    if not _REMOTE_ID.fullmatch(remote_id) or not remote_id.strip("."):
        return False
    if not route_template.startswith("/") or route_template.count("{id}") != 1:
        return False
    if not _URL_CHARS.fullmatch(url):
        return False
    base = urlsplit(base_url)
    if not _plain_origin(base) or "@" in base.netloc:
        return False
    expected = base.path.rstrip("/") + route_template.replace("{id}", remote_id)
    if any(segment in (".", "..") for segment in expected.split("/")):
        return False
    if url.startswith("/"):
        return not url.startswith("//") and url == expected
    target = urlsplit(url)
    if not _plain_origin(target) or target.scheme.lower() != base.scheme.lower():
        return False
    if target.hostname != base.hostname or _port(target) != _port(base):
        return False
    return bool(target.path == expected)


def _plain_origin(parts: SplitResult) -> bool:
    return (
        parts.scheme.lower() in _DEFAULT_PORTS
        and bool(parts.hostname)
        and not parts.query
        and not parts.fragment
    )


def _port(parts: SplitResult) -> int:
    # .port raises ValueError for a non-numeric or out-of-range port: caught above.
    port = parts.port
    return port if port is not None else _DEFAULT_PORTS[parts.scheme.lower()]
