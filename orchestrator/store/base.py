"""The store: a small protocol of domain operations.

SQLite implements it (``sqlite.py``), an in-memory store serves fast unit tests
(``memory.py``), PostgreSQL serves several replicas (``postgres.py``), and one
contract suite (``tests/unit/test_store_contract.py``) runs against all three.

Leases: a store shared by several processes (``shares_work``) hands each active
tracking to one of them at a time, under a lease it renews, and refuses a poll
or terminal write from a process whose lease has passed or moved. The
single-process stores hold everything for their one owner, so their lease
operations are trivial (nothing to claim, nothing ever lost): ``Store``'s own.

Times are unix seconds (float) everywhere in the store; the API renders them.
JSON-valued fields are plain Python objects (dict/list/str/...) here; the
backend chooses how to persist them.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

from orchestrator.store.groups import GroupEventFactory, GroupStore, SealGroup
from orchestrator.store.work_classes import WorkClassMerge as WorkClassMerge
from orchestrator.store.work_classes import WorkClassSummary as WorkClassSummary
from orchestrator.vocabulary import LeaseLoss, NextPollReason, Outcome, TrackingState

DeliveryState = Literal["pending", "delivered", "dead"]


@dataclass(slots=True)
class NewTracking:
    """A validated intake item, ready to be stored."""

    tracking_id: str
    workspace: str
    kind: str  # a Kind's value as a plain str, as in Tracking: the engine interns it
    remote_id: str
    deadline_at: float
    created_at: float
    next_poll_at: float
    labels: dict[str, str] = field(default_factory=dict)
    correlation_id: str | None = None
    callback_url: str | None = None
    notify: str = "terminal"
    deadline_source: str = "default"  # a DeadlineSource's value
    # What the tracking starts with as ``remote`` (work found by filter: its filter).
    remote: Any = None
    # The intake's hint of the work's class for adaptive polling (function_key,
    # build_kind): stored with the row, and replaced by the work's own once a read shows it.
    work_class: str | None = None
    # The caller's W3C trace context (already checked): carried to the tracking's events.
    traceparent: str | None = None
    tracestate: str | None = None
    group_name: str | None = None  # the group it joins (see store/groups.py)
    group_expect: int | None = None  # the group seals itself at this many members


@dataclass(slots=True)
class Tracking:
    tracking_id: str
    workspace: str
    kind: str
    remote_id: str
    state: TrackingState
    outcome: Outcome | None
    remote_status: str | None
    remote: Any
    result: dict[str, Any] | None
    polls: int
    last_polled_at: float | None
    next_poll_at: float | None
    last_error: dict[str, Any] | None
    deadline_at: float
    created_at: float
    terminal_at: float | None
    labels: dict[str, str]
    correlation_id: str | None
    callback_url: str | None
    notify: str
    # The stored body's fingerprint and, for an ordinary in-progress body, its digest
    # (see engine/entry.py); ``load_active`` leaves ``remote`` out when a digest is set.
    remote_fingerprint: str | None = None
    remote_digest: bytes | None = None
    # Which rule set deadline_at (a DeadlineSource's value; None: stored before it was kept).
    deadline_source: str | None = "default"
    # Why the next read is due when it is: the engine's, not stored (None when
    # the engine does not hold the tracking, or it is terminal).
    next_poll_reason: NextPollReason | None = None
    # Adaptive polling: the work's class and when the work began (wall), as the engine
    # last wrote them (None: not known), so that a resumed tracking keeps its plan.
    work_class: str | None = None
    work_started_at: float | None = None
    # The caller's W3C trace context, as intake kept it (None: the caller sent none).
    traceparent: str | None = None
    tracestate: str | None = None
    group_name: str | None = None


@dataclass(slots=True)
class NewEvent:
    """An event to append to the log, with the destinations it must reach.

    ``payload`` is the exact serialized CloudEvent (bytes) that every delivery
    attempt sends. ``destinations`` are sink names (``"sink:<name>"``) or
    ``"callback"`` (whose URL is ``callback_url``). An operational event has no
    tracking: ``tracking_id`` is None and ``sink`` names the sink it is about.
    """

    event_id: str
    tracking_id: str | None
    type: str
    time: float
    payload: bytes
    destinations: list[str] = field(default_factory=list)
    callback_url: str | None = None
    sink: str | None = None


@dataclass(slots=True)
class PollUpdate:
    """The result of one non-terminal poll, persisted in a group commit."""

    tracking_id: str
    polls: int
    last_polled_at: float
    next_poll_at: float
    remote_status: str | None = None
    remote: Any = None
    remote_changed: bool = False  # when False, remote_status/remote are kept as stored
    last_error: dict[str, Any] | None = None
    event: NewEvent | None = None  # a status_changed event, written in the same transaction
    fingerprint: str | None = None  # with a changed remote: its fingerprint and digest
    digest: bytes | None = None
    # A new deadline (wall time, DeadlineSource value): a function job's, derived from it.
    deadline: tuple[float, str] | None = None
    # Adaptive polling's class of the work and when it began (None: keep what is stored).
    work_class: str | None = None
    work_started_at: float | None = None


@dataclass(slots=True)
class Finish:
    """A terminal transition and its terminal event, written in one transaction."""

    tracking_id: str
    outcome: Outcome
    terminal_at: float
    result: dict[str, Any] | None
    event: NewEvent
    polls: int | None = None
    last_polled_at: float | None = None
    remote_status: str | None = None
    remote: Any = None
    remote_changed: bool = False
    last_error: dict[str, Any] | None = None
    # The tracking's group, and what builds the group's event should this end be its
    # last member's (None: not in a group).
    group_name: str | None = None
    group_event: GroupEventFactory | None = None


@dataclass(slots=True)
class EventRecord:
    seq: int
    event_id: str
    tracking_id: str | None  # None for an operational event
    type: str
    time: float
    payload: bytes
    sink: str | None = None  # the sink an operational event is about


@dataclass(frozen=True, slots=True)
class DisabledSink:
    """A sink that gets nothing until it is enabled again (it survives a restart)."""

    destination: str  # "sink:<name>"
    since: float
    reason: str


@dataclass(frozen=True, slots=True)
class ReplaySpan:
    """Which events a replay sends again: seq in (after_seq, until_seq] and
    time in [since, until]; the defaults leave a bound open."""

    after_seq: int = 0
    until_seq: int = 2**62
    since: float = float("-inf")
    until: float = float("inf")

    def holds(self, seq: int, time: float) -> bool:
        return self.after_seq < seq <= self.until_seq and self.since <= time <= self.until


@dataclass(slots=True)
class Delivery:
    delivery_id: int
    event_seq: int
    event_id: str
    destination: str
    url: str | None
    state: DeliveryState
    attempts: int
    next_attempt_at: float
    created_at: float
    event_time: float
    payload: bytes
    last_status: int | None = None
    last_error: str | None = None
    delivered_at: float | None = None


@dataclass(slots=True)
class TrackingQuery:
    state: TrackingState | None = None
    kind: str | None = None
    outcome: Outcome | None = None
    workspace: str | None = None
    group: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    limit: int = 100
    cursor: str | None = None  # opaque, produced by the store


@dataclass(slots=True)
class Claimed:
    """Trackings a claim leased to this process, and how many of them it took over
    from another process whose lease had run out."""

    trackings: list[Tracking] = field(default_factory=list)
    takeovers: int = 0


class Renewal(NamedTuple):
    """What a renewal found: the leases it could not renew, each with why, and the
    live processes (this one included) sharing the store, each with the time of its
    last heartbeat by the store's clock (this one's: now); ``{}`` for a
    single-process store."""

    lost: dict[str, LeaseLoss]
    live: dict[str, float]


class ActiveSource(Protocol):
    """What a resume reads: the active trackings and their count per workspace."""

    async def load_active(
        self, after: str | None = None, limit: int | None = None
    ) -> list[Tracking]:
        """Active trackings ordered by tracking_id, for resuming after a restart.

        Paged so that a restart with 100,000 active never holds them all as
        rows at once: ``after`` is the last tracking_id of the previous page,
        ``limit`` the page size (None: all).
        """

    async def active_counts(self) -> dict[str, int]:
        """Active trackings per workspace (a resume plans its first reads with them)."""

    def active_chunks(self, size: int) -> AsyncGenerator[list[Tracking], None]:
        """Every active tracking once, about ``size`` at a time: a resume's one pass."""
        ...


async def paged_active(source: ActiveSource, size: int) -> AsyncGenerator[list[Tracking], None]:
    """``active_chunks`` by pages of ``load_active``."""
    after: str | None = None
    while page := await source.load_active(after, size):
        after = page[-1].tracking_id
        yield page


class Store(ActiveSource, GroupStore, Protocol):
    # True when other processes poll from the same store (PostgreSQL): work then
    # comes through claim_trackings, not a resume of every active tracking.
    shares_work: bool

    async def open(self) -> None:
        """Create or migrate the schema; raise StoreLocked/StoreError on failure."""

    async def close(self) -> None:
        """Flush pending group-commit writes and close."""

    async def check_writable(self) -> bool:
        """True when a write would succeed now (readiness)."""

    async def create_trackings(
        self, items: Sequence[NewTracking], seal: SealGroup | None = None
    ) -> list[tuple[Tracking, bool]]:
        """Insert all items in one durable transaction, in order.

        Idempotent on (workspace, kind, remote_id): an existing row (active or
        terminal) is returned with ``False`` and left untouched; a new row with
        ``True``. A new row with a ``group_name`` counts into that group (created
        on first use); ``seal``, in the same transaction, seals a group (creating
        it empty if need be). Returns only after the commit is durable. Raises
        StoreUnavailable (nothing written) when the store cannot write, GroupSealed
        (nothing written) when a new member's group is sealed, ended or full.
        """

    async def get_tracking(self, tracking_id: str) -> Tracking | None: ...

    async def list_trackings(self, query: TrackingQuery) -> tuple[list[Tracking], str | None]:
        """Newest first; returns (items, next_cursor or None)."""

    async def record_polls(self, updates: Sequence[PollUpdate]) -> None:
        """Persist non-terminal poll results (and their status_changed events).

        Updates for trackings that are no longer active are ignored. Batched
        with other writes into one transaction; returns after the commit.
        """

    async def finish(self, items: Sequence[Finish]) -> list[bool]:
        """Move trackings to terminal with their terminal events, atomically.

        For each item: if the tracking is still active, set it terminal, append
        the event and one pending delivery per destination, and return True;
        if it is already terminal, write nothing and return False. Returns after
        the commit.
        """

    async def events_after(self, after_seq: int, limit: int) -> list[EventRecord]: ...

    async def last_event_seq(self) -> int: ...

    async def claim_deliveries(
        self, destination: str, now: float, limit: int, lease_s: float
    ) -> list[Delivery]:
        """Pending deliveries of one destination due at or before ``now``, oldest
        first; each claimed one is pushed to ``now + lease_s`` so that a worker
        that dies mid-attempt leaves it due again rather than lost. None while the
        destination is disabled (``disable_sink``): on a shared store, from the
        commit of that state on, whether or not this process has heard of it."""

    async def pending_destinations(self) -> list[str]:
        """Destinations that have pending deliveries (configured or not), sorted."""
        return sorted(await self.outbox_pending_counts())

    async def mark_delivered(self, delivery_id: int, at: float, status: int) -> None: ...

    async def mark_retry(
        self, delivery_id: int, next_attempt_at: float, status: int | None, error: str
    ) -> None: ...

    async def mark_dead(
        self, delivery_id: int, at: float, status: int | None, error: str
    ) -> None: ...

    async def list_deliveries(
        self, state: DeliveryState | None, limit: int, cursor: str | None
    ) -> tuple[list[Delivery], str | None]: ...

    async def get_delivery(self, delivery_id: int) -> Delivery | None: ...

    async def redrive_delivery(self, delivery_id: int, now: float) -> Delivery | None:
        """A dead delivery back to pending, due now; None if it is not dead."""

    async def replay_deliveries(self, destination: str, span: ReplaySpan, now: float) -> int:
        """Every stored event in ``span`` to ``destination`` again, due now: its
        delivery there back to pending with no attempts (same event, same id), or a
        new pending one where it had none. An operational event about
        ``destination`` itself is left out. Returns how many."""

    async def disable_sink(self, sink: DisabledSink, event: NewEvent) -> bool:
        """Record the sink disabled and append its operational event (with its
        deliveries) in one transaction. False, with nothing written, when the sink
        is already recorded disabled."""

    async def enable_sink(self, destination: str, event: NewEvent) -> bool:
        """Clear the sink's disabled record and append its operational event in one
        transaction. False, with nothing written, when it was not disabled."""

    async def disabled_sinks(self) -> list[DisabledSink]:
        """Every sink recorded disabled, by destination (loaded at start-up)."""

    async def outbox_pending_counts(self) -> dict[str, int]:
        """Pending deliveries per destination."""

    async def prune(self, before: float, batch: int) -> int:
        """Delete up to ``batch`` terminal trackings (terminal_at < before) whose
        events are all delivered or dead, with those events and deliveries, and up
        to ``batch`` operational events (time < before) likewise settled. Returns
        how many trackings and operational events were deleted."""

    async def load_work_classes(self) -> list[WorkClassSummary]:
        """Every stored work-class summary (loaded at start-up)."""

    async def merge_work_classes(
        self, merges: Sequence[WorkClassMerge], forget: Sequence[tuple[str, str, str]] = ()
    ) -> list[WorkClassSummary]:
        """Delete the ``forget`` keys; then, in one transaction with the rows locked,
        store each merge's ``fold`` of its row (None: no row yet) and return what was
        stored. Concurrent merges of one class are applied one after the other."""

    # -- leases (several processes on one store; the bodies: a single-process store's) --

    async def claim_trackings(self, limit: int) -> Claimed:
        """Lease up to ``limit`` active trackings whose lease has run out (or that were
        released) to this process, soonest due first."""
        return Claimed()

    async def renew_leases(self, held: int) -> Renewal:
        """Extend every lease this process holds and record it as alive, holding
        ``held`` trackings: the trackings whose lease could not be renewed, with why
        (it ended, here or through another process; it had passed; another process
        holds it now), and the live processes."""
        return Renewal({}, {})

    async def release_leases(
        self, tracking_ids: Sequence[str] | None = None, *, hold_s: float = 0.0
    ) -> None:
        """Give leases up (None: all) so that other processes claim them at once, or
        ``hold_s`` from now."""
        return None

    def forget_leases(self) -> None:
        """Drop every lease held, without asking the database (it is unreachable and
        the leases may have run out meanwhile): their writes are refused from now on."""
        return None
