"""Every exception the orchestrator raises on purpose.

    OrchestratorError
    ├── ConfigError            a bad configuration; start-up stops with one line naming the key
    │   └── ListenError        an address to listen on cannot be bound (in use, not ours)
    ├── StoreError             the store could not do what was asked
    │   ├── StoreUnavailable   full disk, locked file, closed store: retry later (API answers 503)
    │   ├── StoreLocked        the SQLite file is held by another process at start-up
    │   └── StoreNotWritable   the SQLite file or its directory cannot be written at start-up
    ├── EnumResolutionError    the workspace's OpenAPI document does not describe a status route
    ├── TrackingError          a caller's action does not apply to this tracking (tracker.py)
    │   ├── TrackingNotFound   no tracking has that id
    │   ├── NotAFunctionJob    only a function job can be cancelled or have its retries stopped
    │   ├── AlreadyTerminal    the tracking has ended (``outcome``)
    │   │   └── EndedMeanwhile it ended while the action was being taken
    │   └── StillLoading       the service is still loading its active trackings (503)
    ├── GroupError             a group refuses what was asked
    │   ├── GroupSealed        a new member for a sealed or ended group: nothing was written
    │   └── GroupNotFound      no group has that name
    ├── UnknownWorkspace       no workspace of that name is configured
    └── ApiProblem             an RFC 9457 problem the HTTP API answers with (4xx/5xx)

The docstring of each class is its default message.
"""

from __future__ import annotations

from typing import Any

from orchestrator.vocabulary import Outcome


class OrchestratorError(Exception):
    """The orchestrator failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class ConfigError(OrchestratorError):
    """The configuration is not valid."""


class ListenError(ConfigError):
    """The address to listen on cannot be bound."""


class StoreError(OrchestratorError):
    """The store failed."""


class StoreUnavailable(StoreError):
    """The store cannot accept writes right now."""


class StoreLocked(StoreError):
    """The store file is locked by another process."""


class StoreNotWritable(StoreError):
    """The store's file or its directory cannot be written."""


class EnumResolutionError(OrchestratorError):
    """The OpenAPI document does not describe the status route's enums."""


class TrackingError(OrchestratorError):
    """The action does not apply to this tracking."""


class TrackingNotFound(TrackingError):
    """No tracking has that id."""


class NotAFunctionJob(TrackingError):
    """Only a function job can be cancelled or have its retries stopped."""


class AlreadyTerminal(TrackingError):
    """The tracking has ended."""

    def __init__(self, outcome: Outcome | None, message: str | None = None) -> None:
        super().__init__(message or f"the tracking ended as {outcome}")
        self.outcome = outcome


class EndedMeanwhile(AlreadyTerminal):
    """The tracking ended while the action was being taken."""

    def __init__(self) -> None:
        super().__init__(None, self.__doc__)


class GroupError(OrchestratorError):
    """The group refuses this."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{(self.__doc__ or '').strip()}: {name}")
        self.name = name


class GroupSealed(GroupError):
    """The group is sealed (or has ended): it takes no new member."""


class GroupNotFound(GroupError):
    """No group has that name."""


class StillLoading(TrackingError):
    """The service is still loading its active trackings; retry in a moment."""


class UnknownWorkspace(OrchestratorError):
    """No workspace of that name is configured."""


class ApiProblem(OrchestratorError):
    """An RFC 9457 problem answered by the HTTP API."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str | None = None,
        *,
        field: str | None = None,
        type_: str = "about:blank",
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail or title)
        self.status = status
        self.title = title
        self.detail = detail
        self.field = field
        self.type = type_
        self.extra = extra or {}
        self.headers = headers or {}

    def to_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"type": self.type, "title": self.title, "status": self.status}
        if self.detail:
            body["detail"] = self.detail
        if self.field:
            body["field"] = self.field
        body.update(self.extra)
        return body
