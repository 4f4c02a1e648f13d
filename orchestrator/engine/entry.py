"""What the engine keeps in memory per active tracking: small on purpose.

An ``Entry`` is the tracking's identity (fixed while it is held), its place in
the book (``engine/book.py``) and its ``PollState``: everything a poll reads
and changes, replaced whole by each decision (``engine/decision.py``).

At 100,000 active trackings every byte here counts, so the last status body is
not kept (the store has it); labels and the optional fields share one empty
dict / None when unused.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import NamedTuple

from orchestrator.kinds.base import JsonObject
from orchestrator.store.base import NewEvent, PollUpdate, Tracking
from orchestrator.vocabulary import NextPollReason

_NO_LABELS: dict[str, str] = {}
_FIRST_READ = NextPollReason.FIRST_READ


class PollState(NamedTuple):
    """What a poll reads and changes of a tracking; each decision returns the next."""

    polls: int
    last_polled_at: float | None
    remote_status: str | None
    fingerprint: str
    # Digest of the last body read, kept only while that body was an ordinary
    # in-progress state: an identical body then needs no second reading.
    digest: bytes | None
    last_error: JsonObject | None
    delay: float | None  # the backoff's last delay; None: it starts over
    not_found_count: int  # 404s in a row
    not_found_since: float  # wall: the first of them
    anomaly: JsonObject | None  # the last contract anomaly, while failing closed
    # What the last read adds to a deadline result (work found by filter: its jobs
    # and what it waits for), for a deadline met with no read allowed.
    summary: Mapping[str, object] | None
    deadline: float  # wall
    deadline_mono: float
    deadline_source: str | None
    # Adaptive polling: the work's class (function key, build kind) once known, and
    # when the work began (its own CreatedAt once read, else our intake); stored with
    # every poll result, so that a resumed tracking is planned as before.
    work_class: str | None
    started: float


_new_state = tuple.__new__


class Entry:
    __slots__ = (
        "callback_url",
        "correlation_id",
        "created_at",
        "due",
        "group_name",
        "kind",
        "kind_state",
        "labels",
        "notify",
        "reason",
        "remote_id",
        "resumed",
        "state",
        "ticket",
        "trace",
        "tracking_id",
        "workspace",
    )

    def __init__(
        self,
        t: Tracking,
        deadline_mono: float,
        work_class: str | None = None,
        fingerprint: str = "",
        digest: bytes | None = None,
        delay: float | None = None,
    ) -> None:
        self.tracking_id = t.tracking_id
        # Every row read back from the store brings its own copy of these few
        # strings; interning keeps one per value: 190 bytes less per resumed entry.
        self.workspace = sys.intern(t.workspace)
        self.kind = sys.intern(t.kind)
        self.remote_id = t.remote_id
        self.created_at = created = t.created_at
        notify = t.notify  # intake gives a member of the enum: shared already
        self.notify = sys.intern(notify) if type(notify) is str else notify
        self.labels = t.labels or _NO_LABELS
        self.correlation_id = t.correlation_id
        self.callback_url = t.callback_url
        # The caller's trace context, for the events (None: the caller sent none).
        traceparent = t.traceparent
        self.trace = None if traceparent is None else (traceparent, t.tracestate)
        # Interned as the workspace: a group's 100,000 members share one string.
        self.group_name = None if t.group_name is None else sys.intern(t.group_name)
        self.due = 0.0
        self.ticket = 0  # the book's: which schedule of the entry is current
        self.resumed = False  # resumed at start-up and not read yet by this process
        self.reason = _FIRST_READ  # why the next read is due when it is
        self.kind_state: object = None  # the kind handler's own state (its ``adopt``)
        work_class = work_class or t.work_class
        status, source, started = t.remote_status, t.deadline_source, t.work_started_at
        # The tuple made directly: a fifth of the cost of the named tuple's keywords,
        # once per entry (a resume makes a million).
        self.state = _new_state(
            PollState,
            (
                t.polls,
                t.last_polled_at,
                sys.intern(status) if type(status) is str else status,  # remote_status
                sys.intern(fingerprint),  # one per state, however many trackings are in it
                digest,
                t.last_error,
                delay,
                0,  # not_found_count
                0.0,  # not_found_since
                None,  # anomaly
                None,  # summary
                t.deadline_at,
                deadline_mono,
                sys.intern(source) if type(source) is str else source,  # deadline_source
                None if work_class is None else sys.intern(work_class),
                created if started is None else started,
            ),
        )

    @property
    def digest(self) -> bytes | None:
        return self.state.digest

    def to_tracking(
        self,
        *,
        state: str = "active",
        outcome: str | None = None,
        remote: object = None,
        result: JsonObject | None = None,
        last_polled_at: float | None = None,
        terminal_at: float | None = None,
    ) -> Tracking:
        s = self.state
        return Tracking(
            tracking_id=self.tracking_id,
            workspace=self.workspace,
            kind=self.kind,
            remote_id=self.remote_id,
            state=state,  # type: ignore[arg-type]
            outcome=outcome,  # type: ignore[arg-type]
            remote_status=s.remote_status,
            remote=remote,
            result=result,
            polls=s.polls,
            last_polled_at=last_polled_at,
            next_poll_at=None,
            last_error=s.last_error,
            deadline_at=s.deadline,
            deadline_source=s.deadline_source,
            created_at=self.created_at,
            terminal_at=terminal_at,
            labels=dict(self.labels),
            correlation_id=self.correlation_id,
            callback_url=self.callback_url,
            notify=self.notify,
            next_poll_reason=self.reason if state == "active" else None,
            traceparent=None if self.trace is None else self.trace[0],
            tracestate=None if self.trace is None else self.trace[1],
            group_name=self.group_name,
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
        s = self.state
        return PollUpdate(
            tracking_id=self.tracking_id,
            polls=s.polls,
            last_polled_at=now_w,
            next_poll_at=next_poll_at,
            remote_status=s.remote_status,
            remote=remote,
            remote_changed=changed,
            fingerprint=s.fingerprint if changed else None,
            digest=s.digest if changed else None,
            last_error=s.last_error,
            event=event,
            deadline=(s.deadline, s.deadline_source or "") if deadline_moved else None,
            work_class=s.work_class,
            work_started_at=None if s.work_class is None else s.started,
        )
