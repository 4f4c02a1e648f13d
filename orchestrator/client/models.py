"""What the client answers with: typed views of the API's JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.vocabulary import Outcome, TrackingState

TERMINAL_OUTCOMES: tuple[Outcome, ...] = tuple(Outcome)
EVENT_PREFIX = "com.moltaro.orchestrator."
SINK_PREFIX = EVENT_PREFIX + "sink."


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
        return cls(
            tracking_id=data["tracking_id"],
            workspace=data["workspace"],
            kind=data["kind"],
            remote_id=data.get("remote_id"),
            state=data["state"],
            outcome=data.get("outcome"),
            remote_status=data.get("remote_status"),
            result=data.get("result"),
            polls=int(data.get("polls") or 0),
            last_error=data.get("last_error"),
            deadline_at=data["deadline_at"],
            created_at=data["created_at"],
            terminal_at=data.get("terminal_at"),
            next_poll_at=data.get("next_poll_at"),
            next_poll_reason=data.get("next_poll_reason"),
            labels=dict(data.get("labels") or {}),
            correlation_id=data.get("correlation_id"),
            raw=dict(data),
            deadline_source=data.get("deadline_source"),
        )


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
    ``sink`` holds that sink's state instead.
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
        return None if self.data is not None else dict(self.raw.get("data") or {})

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Event:
        return cls(
            seq=int(data["seq"]),
            id=data["id"],
            type=data["type"],
            subject=data["subject"],
            time=data["time"],
            data=None if data["type"].startswith(SINK_PREFIX) else Tracking.from_json(data["data"]),
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
