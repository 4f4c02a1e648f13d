"""What the client answers with: typed views of the API's JSON, and the typed errors
of each problem the API answers (the tree in ``orchestrator.client``). These are
not the service's own ``orchestrator.errors``: they describe answers as a caller
receives them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from orchestrator.vocabulary import Outcome, TrackingState

TERMINAL_OUTCOMES: tuple[Outcome, ...] = tuple(Outcome)
EVENT_PREFIX = "com.moltaro.orchestrator."
SINK_PREFIX = EVENT_PREFIX + "sink."
GROUP_PREFIX = EVENT_PREFIX + "group."
# The members of a tracking that the service always sends.
_REQUIRED = ("tracking_id", "workspace", "kind", "state", "deadline_at", "created_at")


@dataclass(frozen=True, slots=True)
class Tracking:
    """A tracking resource (see CONTRACT.md section 3); ``raw`` keeps the whole JSON.

    ``kind``, ``state`` and ``outcome`` stay the strings the service sent (they equal
    the members of ``orchestrator.vocabulary``), so a newer service's words still load.
    """

    tracking_id: str
    workspace: str
    kind: str
    remote_id: str | None  # trigger_work, action_work: the first matched job (None before)
    state: str
    outcome: str | None
    remote_status: str | None
    result: dict[str, Any] | None
    polls: int
    last_error: dict[str, Any] | None
    deadline_at: str
    created_at: str
    terminal_at: str | None
    next_poll_at: str | None
    next_poll_reason: str | None
    labels: dict[str, str]
    correlation_id: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)
    # caller, derived or default (None from a service that predates it)
    deadline_source: str | None = None
    group: str | None = None  # the group it belongs to, if any

    @property
    def terminal(self) -> bool:
        return self.state == TrackingState.TERMINAL

    @property
    def remote(self) -> Any:
        """The last status body as Moltaro sent it."""
        return self.raw.get("remote")

    @property
    def filter(self) -> dict[str, Any] | None:
        """trigger_work, action_work: the filter the work is found by (None otherwise)."""
        found = self.raw.get("filter")
        return dict(found) if isinstance(found, Mapping) else None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Tracking:
        values: dict[str, Any] = {f.name: data.get(f.name) for f in fields(cls)}
        values.update({name: data[name] for name in _REQUIRED})  # a KeyError when missing
        values.update(
            polls=int(data.get("polls") or 0), labels=dict(data.get("labels") or {}), raw=dict(data)
        )
        return cls(**values)


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One answer of the batch intake, in request order: a tracking or a problem."""

    status: int
    tracking: Tracking | None
    problem: dict[str, Any] | None

    @property
    def created(self) -> bool:
        return self.status == 201


@dataclass(frozen=True, slots=True)
class TrackingPage:
    items: list[Tracking]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Event:
    """A CloudEvent from the feed or the stream.

    ``data`` is the tracking at that moment; for an operational event about a sink
    (``com.moltaro.orchestrator.sink.disabled`` / ``.enabled``) it is None, and
    ``sink`` holds that sink's state instead; for a group's event
    (``com.moltaro.orchestrator.group.completed`` / ``.deadline_exceeded``) it is
    None, and ``group`` holds the group as it ended.
    """

    seq: int
    id: str
    type: str
    subject: str
    time: str
    data: Tracking | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def outcome(self) -> str | None:
        """The terminal outcome this event announces, or None (``status_changed``,
        an occurrence, a sink event)."""
        kind, _, last = self.type.removeprefix(EVENT_PREFIX).partition(".")
        return last if kind == "tracking" and last in TERMINAL_OUTCOMES else None

    @property
    def sink(self) -> dict[str, Any] | None:
        """A sink event's data (name, disabled, disabled_since, disabled_reason,
        last_error, pending, ...); None for a tracking's event."""
        if not self.type.startswith(SINK_PREFIX):
            return None
        return dict(self.raw.get("data") or {})

    @property
    def group(self) -> Group | None:
        """A group event's group (with ``not_succeeded`` or ``open_members`` in
        ``raw``); None for any other event."""
        if not self.type.startswith(GROUP_PREFIX):
            return None
        return Group.from_json(self.raw.get("data") or {})

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Event:
        return cls(
            seq=int(data["seq"]),
            id=data["id"],
            type=data["type"],
            subject=data["subject"],
            time=data["time"],
            data=None
            if data["type"].startswith((SINK_PREFIX, GROUP_PREFIX))
            else Tracking.from_json(data["data"]),
            raw=dict(data),
        )


@dataclass(frozen=True, slots=True)
class EventPage:
    events: list[Event]
    next_after: int


@dataclass(frozen=True, slots=True)
class CancelResult:
    """The workspace accepted the cancel (202); the tracking goes on to the real end."""

    tracking_id: str
    remote_status: str | None
    detail: str


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


_ERRORS: dict[int, type[OrchestratorApiError]] = {
    **dict.fromkeys((400, 413, 415, 422), InvalidRequest),
    401: Unauthorized,
    404: NotFound,
    409: Conflict,
    503: Unavailable,
}


def error_for(status: int, body: Mapping[str, Any] | None, headers: Mapping[str, str]) -> Exception:
    default = ServerError if status >= 500 else OrchestratorApiError
    error = _ERRORS.get(status, default)(status, body)
    if isinstance(error, Unavailable):
        raw = headers.get("Retry-After", "")
        error.retry_after = float(raw) if raw.isdigit() else None
    return error


@dataclass(frozen=True, slots=True)
class Group:
    """A group resource (``GET /v1/groups/{group}``); ``raw`` keeps the whole JSON."""

    group: str
    state: str  # open, sealed, completed, deadline_exceeded
    sealed: bool
    ended: bool
    total: int
    active: int
    terminal: int
    outcomes: dict[str, int]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def all_succeeded(self) -> bool:
        return self.terminal == self.total and self.outcomes.get("succeeded", 0) == self.total

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Group:
        members = data.get("members") or {}
        return cls(
            group=str(data["group"]),
            state=str(data["state"]),
            sealed=bool(data.get("sealed")),
            ended=bool(data.get("ended")),
            total=int(members.get("total") or 0),
            active=int(members.get("active") or 0),
            terminal=int(members.get("terminal") or 0),
            outcomes={str(k): int(v) for k, v in (data.get("outcomes") or {}).items()},
            raw=dict(data),
        )
