"""What the client answers with: typed views of the API's JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.vocabulary import Outcome, TrackingState

TERMINAL_OUTCOMES: tuple[Outcome, ...] = tuple(Outcome)


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
    """A CloudEvent from the feed or the stream; ``data`` is the tracking at that moment."""

    seq: int
    id: str
    type: str
    subject: str
    time: str
    data: Tracking
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def outcome(self) -> str | None:
        """The terminal outcome this event announces, or None for ``status_changed``."""
        last = self.type.rsplit(".", 1)[-1]
        return last if last in TERMINAL_OUTCOMES else None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Event:
        return cls(
            seq=int(data["seq"]),
            id=data["id"],
            type=data["type"],
            subject=data["subject"],
            time=data["time"],
            data=Tracking.from_json(data["data"]),
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
