"""What intake reads from the raw body Moltaro returned on enqueue or build submission.

The polling URL in such a body is input, so it is never followed: it is only
checked against the route the workspace's configuration already names. The check
is deliberately narrower than URL equivalence: anything a legitimate Moltaro
``StatusUrl`` would not contain (percent-escapes, queries, fragments, userinfo,
backslashes) is refused rather than normalised.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import SplitResult, urlsplit

from orchestrator.interpret._read import as_int, as_mapping, get_ci

_ID_FIELDS = ("JobId", "Id")
_URL_FIELDS = ("StatusUrl", "PollingUrl", "Url", "Location")
_REMOTE_ID = re.compile(r"[A-Za-z0-9._:-]{1,200}")
# Every character a route, an id, a host, an IP literal or a port can need; '%',
# '?', '#', '@', '\' and whitespace are absent on purpose.
_URL_CHARS = re.compile(r"[A-Za-z0-9._~:/\[\]-]{1,2048}")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def extract_remote_id(enqueue_response: Any) -> str | None:
    """The id in ``JobId`` or else ``Id``, top level or under ``Data``, case-insensitively.

    The value is returned as received (an integer as its decimal text); intake
    validates its form.
    """
    top = as_mapping(enqueue_response)
    if top is None:
        return None
    data = as_mapping(get_ci(top, "Data"))
    for name in _ID_FIELDS:
        for level in (top, data):
            value = get_ci(level, name)
            if isinstance(value, str) and value:
                return value
            if isinstance(value, int) and not isinstance(value, bool):
                number = as_int(value)
                if number is not None:
                    return str(number)
    return None


def extract_polling_url(enqueue_response: Any) -> str | None:
    """The first of ``StatusUrl``, ``PollingUrl``, ``Url``, ``Location`` (top level, then Data)."""
    top = as_mapping(enqueue_response)
    if top is None:
        return None
    data = as_mapping(get_ci(top, "Data"))
    for name in _URL_FIELDS:
        for level in (top, data):
            value = get_ci(level, name)
            if isinstance(value, str) and value.strip():
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
