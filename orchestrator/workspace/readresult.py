"""One HTTP exchange with a workspace, classified.

The transport hands the status line, the raw body and the Retry-After header
to ``answered`` and transport trouble to ``trouble``; nothing here does I/O.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(slots=True)
class ReadResult:
    """One HTTP exchange with the workspace, classified.

    ``result`` is the ``orchestrator_polls_total`` label: ``ok`` and
    ``not_found`` are answers; everything else is transport trouble, never
    terminal.
    """

    result: str
    http_status: int | None = None
    body: Any = None
    retry_after: float | None = None
    error: dict[str, Any] | None = None
    duration: float = 0.0
    # A status read's body digest; ``unchanged`` when it equals the digest the
    # caller had seen, in which case the body was not parsed (``body`` is None).
    digest: bytes | None = None
    unchanged: bool = False

    @property
    def answered(self) -> bool:
        """The workspace itself answered (it is up), whatever it said."""
        return self.http_status is not None and self.http_status < 500


_CLASSES = {404: "not_found", 429: "rate_limited", 401: "unauthorized", 403: "unauthorized"}


def classify_status(status: int) -> str:
    """A non-2xx answer's label. Any other below 500 is not a status body we can
    read: treat it as an invalid response and keep polling."""
    return "http_5xx" if status >= 500 else _CLASSES.get(status, "invalid_response")


def trouble(kind: str, message: str, duration: float) -> ReadResult:
    """No answer: ``timeout`` or ``connection`` (read again later)."""
    return ReadResult(kind, error={"kind": kind, "message": message}, duration=duration)


def invalid(read: ReadResult, message: str) -> ReadResult:
    """An answer that is not what the request needs (``invalid_response``)."""
    error = {"kind": "invalid_response", "message": message}
    return ReadResult("invalid_response", read.http_status, error=error, duration=read.duration)


def timed_out(timeout_s: float, duration: float) -> ReadResult:
    """No answer within the workspace's total request timeout."""
    return trouble("timeout", f"no answer in {timeout_s}s", duration)


def answered(
    status: int,
    raw: bytes,
    retry_after: float | None,
    duration: float,
    seen: bytes | None = None,
    digest_key: bytes | None = None,
) -> ReadResult:
    """An HTTP answer judged: a 2xx body parsed (or found unchanged), anything else classified.

    ``retry_after`` is the answer's Retry-After in seconds, whatever its status.
    """
    if status in (200, 201, 202):
        # Most reads find the job as it was: a digest of the bytes spares
        # parsing and interpreting them again (128 bits: no collision to fear).
        digest = None
        if digest_key is not None:
            digest = hashlib.blake2b(raw, digest_size=16, key=digest_key).digest()
            if digest == seen:
                return ReadResult("ok", status, None, retry_after, None, duration, digest, True)
        try:
            return ReadResult("ok", status, orjson.loads(raw), retry_after, None, duration, digest)
        except orjson.JSONDecodeError:
            bad = {"kind": "invalid_response", "message": "body is not JSON", "status": status}
            return ReadResult("invalid_response", status, None, retry_after, bad, duration)
    result = classify_status(status)
    error = None
    if result != "not_found":
        error = {"kind": result, "message": f"HTTP {status}", "status": status}
    body = None
    if 400 <= status < 500:
        # A refusal explains itself in the body: a refused cancel its current Status,
        # a refused command its problem details (reported to the caller, bounded).
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = None
    return ReadResult(result, status, body, retry_after, error, duration)
