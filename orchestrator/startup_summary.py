"""The one INFO line that orients whoever starts the service.

Where the API listens, each workspace (name, base URL), each sink (name, URL,
signed or not), the store and, when the bundled simulator runs in the same
process, its URL. Nothing secret: URLs lose their userinfo and query (a
webhook URL may carry a token there) and a PostgreSQL DSN never shows a
password.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

from orchestrator.config import Settings
from orchestrator.events.cloudevents import sink_destination


def public_url(url: str, keep_user: bool = False) -> str:
    """``url`` without password, query or fragment (and its user name unless
    ``keep_user``): what may be printed."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    if keep_user and parts.username:
        netloc = f"{parts.username}@{netloc}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def store_description(settings: Settings) -> str:
    s = settings.store
    if s.url:
        # The password lives in password_env, but a DSN is printed without any.
        return f"PostgreSQL {public_url(s.url, keep_user=True)}"
    return f"SQLite {s.path}"


def startup_summary(
    settings: Settings,
    api_url: str,
    keys: Mapping[str, bytes | None],
    simulator_url: str | None = None,
) -> tuple[str, dict[str, object]]:
    """The message and its structured fields."""
    workspaces = [{"name": w.name, "base_url": w.base_url} for w in settings.workspaces]
    sinks = [
        {
            "name": s.name,
            "url": public_url(s.url),
            "signed": keys.get(sink_destination(s.name)) is not None,
        }
        for s in settings.events.sinks
    ]
    store = store_description(settings)
    words = [f"listening on {api_url}"]
    words.append("workspaces: " + ", ".join(f"{w['name']} {w['base_url']}" for w in workspaces))
    shown = [f"{s['name']} {s['url']} ({'signed' if s['signed'] else 'UNSIGNED'})" for s in sinks]
    words.append("sinks: " + (", ".join(shown) if shown else "none (events: GET /v1/events)"))
    words.append(f"store: {store}")
    fields: dict[str, object] = {
        "listen": api_url,
        "workspaces": workspaces,
        "sinks": sinks,
        "store": store,
    }
    if simulator_url is not None:
        words.append(f"simulator: {simulator_url}")
        fields["simulator"] = simulator_url
    return "; ".join(words), fields
