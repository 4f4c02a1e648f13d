"""The client's typed errors: each problem the API answers is one of these.

    OrchestratorApiError        status, title, detail, field, body
    ├── InvalidRequest          400, 413, 415, 422: the request names a bad field
    ├── Unauthorized            401: missing or wrong bearer token
    ├── NotFound                404: no such tracking (or delivery)
    ├── Conflict                409: already terminal, not cancellable
    ├── Unavailable             503: draining or store full; retry (``retry_after``)
    └── ServerError             any other 5xx

Nothing here is the service's own ``orchestrator.errors``: these describe
answers as a caller receives them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class OrchestratorApiError(Exception):
    """The orchestrator answered with a problem."""

    def __init__(self, status: int, body: Mapping[str, Any] | None = None) -> None:
        self.status = status
        self.body: dict[str, Any] = dict(body or {})
        self.title: str = str(self.body.get("title") or f"HTTP {status}")
        detail = self.body.get("detail")
        self.detail: str | None = None if detail is None else str(detail)
        problem_field = self.body.get("field")
        self.field: str | None = None if problem_field is None else str(problem_field)
        super().__init__(f"{status} {self.title}" + (f": {self.detail}" if self.detail else ""))


class InvalidRequest(OrchestratorApiError):
    """The request was refused (400, 413, 415, 422); ``field`` names the culprit."""


class Unauthorized(OrchestratorApiError):
    """A valid bearer token is required (401)."""


class NotFound(OrchestratorApiError):
    """No such resource (404)."""


class Conflict(OrchestratorApiError):
    """The resource's state does not allow this (409)."""


class Unavailable(OrchestratorApiError):
    """The service cannot take this now (503); try again after ``retry_after`` seconds."""

    retry_after: float | None = None


class ServerError(OrchestratorApiError):
    """The service failed (5xx other than 503)."""


def error_for(status: int, body: Mapping[str, Any] | None, headers: Mapping[str, str]) -> Exception:
    cls: type[OrchestratorApiError]
    if status in (400, 413, 415, 422):
        cls = InvalidRequest
    elif status == 401:
        cls = Unauthorized
    elif status == 404:
        cls = NotFound
    elif status == 409:
        cls = Conflict
    elif status == 503:
        cls = Unavailable
    elif status >= 500:
        cls = ServerError
    else:
        cls = OrchestratorApiError
    error = cls(status, body)
    if isinstance(error, Unavailable):
        raw = headers.get("Retry-After", "")
        error.retry_after = float(raw) if raw.isdigit() else None
    return error
