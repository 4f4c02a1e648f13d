"""How a workspace's failed answer to a request made for a caller is reported to that caller.

A refusal is reported as a refusal, trouble as trouble, each with what the
workspace said (never a secret):

    workspace answered        our answer                  carries
    404                       404                         workspace_status, workspace_problem
    409                       409                         workspace_status, workspace_problem
    any other 4xx but         422                         workspace_status, workspace_problem
      401, 403, 429
      (a read of our own: 502 invalid_response, with the same two)
    429, or 5xx with          503 with Retry-After        error_kind, workspace_status
      Retry-After
    no answer in time         504                         error_kind (timeout)
    401/403, other 5xx,       502                         error_kind, workspace_status
      no connection, a 2xx
      body we cannot use

Pure: no I/O. ``workspace_problem`` keeps only the problem-details members
``type``, ``title``, ``status``, ``detail`` and ``errors``, each bounded, with
the workspace token and anything following ``Bearer`` blanked out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from orchestrator.workspace.readresult import ReadResult

_TEXT_MAX = 500
_ERRORS_MAX = 20  # fields of ``errors``
_MESSAGES_MAX = 5  # messages per field
_PROBLEM_MAX = 4096  # bytes of the whole carried problem; above it ``errors`` goes
_BEARER = re.compile(r"(?i)\bbearer\s+\S+")
_REDACTED = "[redacted]"


@dataclass(frozen=True, slots=True)
class Failure:
    """Our answer to a caller when the workspace did not do what was asked."""

    status: int
    detail: str
    extra: dict[str, Any] = field(default_factory=dict)
    retry_after: float | None = None


def failure(
    read: ReadResult, doing: str, secret: str | None = None, *, command: bool = True
) -> Failure:
    """``read`` (not a usable success) as our answer; ``doing`` names the request
    ("the cancel", "reading the job"), ``secret`` is the workspace token.

    ``command``: the request acted on what the caller named, so a 4xx is its
    refusal. Otherwise (the service's own reads, such as the catalog's) a 4xx is
    the workspace's error: 502 ``invalid_response``, with what it said.
    """
    code = read.http_status
    if code is not None and 400 <= code < 500 and code not in (401, 403, 429):
        said = {"workspace_status": code, "workspace_problem": safe_problem(read.body, secret)}
        if not command:
            return Failure(
                502, f"{doing} failed: HTTP {code}", {"error_kind": "invalid_response", **said}
            )
        status = code if code in (404, 409) else 422
        return Failure(status, f"the workspace refused {doing} (HTTP {code})", said)
    kind = "invalid_response" if read.result in ("ok", "not_found") else read.result
    detail = f"{doing} failed: {kind}" + (f" (HTTP {code})" if code is not None else "")
    extra: dict[str, Any] = {"error_kind": kind, "workspace_status": code}
    if kind == "timeout":
        return Failure(504, detail, extra)
    if read.retry_after is not None and kind in ("rate_limited", "http_5xx"):
        return Failure(503, detail, extra, read.retry_after)
    return Failure(502, detail, extra)


def safe_problem(body: Any, secret: str | None = None) -> dict[str, Any] | None:
    """The members of an RFC 9457 body worth showing a caller, bounded and scrubbed."""
    if not isinstance(body, Mapping):
        return None
    members = {str(k).lower(): v for k, v in body.items()}
    out: dict[str, Any] = {}
    for name in ("type", "title", "detail"):
        value = members.get(name)
        if isinstance(value, str):
            out[name] = _scrub(value, secret)
    status = members.get("status")
    if isinstance(status, int) and not isinstance(status, bool):
        out["status"] = status
    errors = _errors(members.get("errors"), secret)
    if errors:
        out["errors"] = errors
        if len(orjson.dumps(out)) > _PROBLEM_MAX:
            del out["errors"]
    return out or None


def _errors(raw: Any, secret: str | None) -> dict[str, list[str]] | None:
    """ASP.NET's validation ``errors``: field name to messages."""
    if not isinstance(raw, Mapping):
        return None
    out: dict[str, list[str]] = {}
    for name, messages in list(raw.items())[:_ERRORS_MAX]:
        listed = messages if isinstance(messages, list) else [messages]
        texts = [_scrub(m, secret) for m in listed[:_MESSAGES_MAX] if isinstance(m, str)]
        out[_scrub(str(name), secret)[:200]] = texts
    return out


def _scrub(text: str, secret: str | None) -> str:
    if secret:
        text = text.replace(secret, _REDACTED)
    text = _BEARER.sub(f"Bearer {_REDACTED}", text)
    return text if len(text) <= _TEXT_MAX else text[: _TEXT_MAX - 1] + "…"
