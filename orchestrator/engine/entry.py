"""What the engine keeps in memory per active tracking: small on purpose.

At 100,000 active trackings every byte here counts, so the last status body is
not kept (the store has it); labels and the optional fields share one empty
dict / None when unused.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from orchestrator.store.base import NewEvent, PollUpdate, Tracking
from orchestrator.vocabulary import NextPollReason

_NO_LABELS: dict[str, str] = {}


class Entry:
    __slots__ = (
        "anomaly",
        "callback_url",
        "correlation_id",
        "created_at",
        "deadline",
        "deadline_mono",
        "deadline_source",
        "delay",
        "digest",
        "due",
        "fingerprint",
        "kind",
        "kind_state",
        "labels",
        "last_error",
        "last_polled_at",
        "not_found_count",
        "not_found_since",
        "notify",
        "polls",
        "reason",
        "remote_id",
        "remote_status",
        "resumed",
        "started",
        "summary",
        "ticket",
        "tracking_id",
        "work_class",
        "workspace",
    )

    def __init__(self, t: Tracking, deadline_mono: float, work_class: str | None = None) -> None:
        self.tracking_id = t.tracking_id
        # Every row read back from the store brings its own copy of these few
        # strings; interning keeps one per value: 190 bytes less per resumed entry.
        self.workspace = sys.intern(t.workspace)
        self.kind = sys.intern(t.kind)
        self.remote_id = t.remote_id
        self.deadline = t.deadline_at
        self.deadline_source = t.deadline_source
        self.deadline_mono = deadline_mono
        self.created_at = t.created_at
        self.notify = t.notify
        self.labels = t.labels or _NO_LABELS
        self.correlation_id = t.correlation_id
        self.callback_url = t.callback_url
        self.polls = t.polls
        self.remote_status = t.remote_status
        self.last_error = t.last_error
        self.last_polled_at = t.last_polled_at
        self.fingerprint = ""
        # Digest of the last body read, kept only while that body was an ordinary
        # in-progress state: an identical body then needs no second reading.
        self.digest: bytes | None = None
        self.delay: float | None = None
        self.due = 0.0
        self.ticket = 0  # the book's: which schedule of the entry is current
        self.kind_state: object = None  # the kind handler's own state (its ``adopt``)
        self.not_found_count = 0
        self.not_found_since = 0.0
        self.anomaly: dict[str, object] | None = None  # the last one, while failing closed
        # What the last read adds to a deadline result (work found by filter: its
        # jobs and what it waits for), for a deadline met with no read allowed.
        self.summary: Mapping[str, Any] | None = None
        self.resumed = False  # resumed at start-up and not read yet by this process
        self.reason = NextPollReason.FIRST_READ  # why the next read is due when it is
        # Adaptive polling: the work's class (function key, build kind) once known, and
        # when the work began (its own CreatedAt once read, else our intake); stored with
        # every poll result, so that a resumed tracking is planned as before.
        work_class = work_class or t.work_class
        self.work_class = None if work_class is None else sys.intern(work_class)
        self.started = t.created_at if t.work_started_at is None else t.work_started_at

    def to_tracking(
        self,
        *,
        state: str = "active",
        outcome: str | None = None,
        remote: object = None,
        result: dict[str, object] | None = None,
        last_polled_at: float | None = None,
        next_poll_at: float | None = None,
        terminal_at: float | None = None,
    ) -> Tracking:
        return Tracking(
            tracking_id=self.tracking_id,
            workspace=self.workspace,
            kind=self.kind,
            remote_id=self.remote_id,
            state=state,  # type: ignore[arg-type]
            outcome=outcome,  # type: ignore[arg-type]
            remote_status=self.remote_status,
            remote=remote,
            result=result,
            polls=self.polls,
            last_polled_at=last_polled_at,
            next_poll_at=next_poll_at,
            last_error=self.last_error,
            deadline_at=self.deadline,
            deadline_source=self.deadline_source,
            created_at=self.created_at,
            terminal_at=terminal_at,
            labels=dict(self.labels),
            correlation_id=self.correlation_id,
            callback_url=self.callback_url,
            notify=self.notify,
            next_poll_reason=self.reason if state == "active" else None,
        )

    def update(
        self,
        now_w: float,
        remote: object,
        changed: bool,
        next_poll_at: float,
        event: NewEvent | None = None,
        deadline_moved: bool = False,
    ) -> PollUpdate:
        """This entry's state as a poll result to store (``remote`` when ``changed``)."""
        return PollUpdate(
            tracking_id=self.tracking_id,
            polls=self.polls,
            last_polled_at=now_w,
            next_poll_at=next_poll_at,
            remote_status=self.remote_status,
            remote=remote,
            remote_changed=changed,
            fingerprint=self.fingerprint if changed else None,
            digest=self.digest if changed else None,
            last_error=self.last_error,
            event=event,
            deadline=(self.deadline, self.deadline_source or "") if deadline_moved else None,
            work_class=self.work_class,
            work_started_at=None if self.work_class is None else self.started,
        )
