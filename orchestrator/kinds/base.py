"""The kind-handler interface and what a handler returns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeVar

from orchestrator.interpret import Phase

if TYPE_CHECKING:
    from orchestrator.interpret.work import WorkTimes
    from orchestrator.store.base import Tracking
    from orchestrator.workspace.client import WorkspaceClient
    from orchestrator.workspace.readresult import ReadResult


class PollTarget(Protocol):
    """What a handler may know of a tracking: read-only."""

    @property
    def tracking_id(self) -> str: ...
    @property
    def remote_id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def created_at(self) -> float: ...
    @property
    def digest(self) -> bytes | None: ...
    @property
    def kind_state(self) -> object:
        """The handler's own state for this tracking, as ``adopt`` made it: kept on the
        tracking's entry (so it ends with it), changed in place by the handler."""


class Adopted(NamedTuple):
    """What a handler takes over a tracking (new or resumed) with, from its stored row."""

    fingerprint: str = ""
    digest: bytes | None = None
    not_before: float | None = None  # wall: the work will not move before this
    state: object = None  # the handler's own per-tracking state (``kind_state``)


S = TypeVar("S")
JsonObject = dict[str, object]  # a JSON object as parsed: what results and errors are


def owned(target: PollTarget, cls: type[S]) -> S:
    """The handler's own state of ``target``, of the type its ``adopt`` made."""
    state = target.kind_state
    if not isinstance(state, cls):
        raise TypeError(f"{target.tracking_id}: no {cls.__name__} state (not adopted)")
    return state


class WorkSeen(NamedTuple):
    """Work a poll saw beside the tracking's own status body (a schedule's occurrence),
    for adaptive polling: learned from once it has ended, planned by while it runs."""

    kind: str  # whose classes it shares: a schedule's occurrences are function jobs
    work_class: str  # the occurrence's FunctionKey
    started: float  # wall: its own CreatedAt
    ended: float | None  # wall: its own end; None while it runs


@dataclass(frozen=True, slots=True)
class Judgement:
    """What one poll of a tracking found, judged by its kind; nothing decided yet.

    ``label`` is the poll's ``orchestrator_polls_total`` result: ``ok`` (an answer
    judged: ``phase`` set, or ``unchanged``), ``not_found``, or transport trouble
    (``error`` says which). ``reads`` are every request the poll made, as
    (result label, seconds), for the metrics.
    """

    label: str
    reads: Sequence[tuple[str, float]]
    answered: bool = False  # the workspace itself answered (it is up)
    retry_after: float | None = None  # the longest Retry-After any read carried
    error: JsonObject | None = None
    unchanged: bool = False  # the same ordinary in-progress state as last time
    phase: Phase | None = None
    fingerprint: str = ""
    digest: bytes | None = None  # kept only for an ordinary in-progress body
    remote_status: str | None = None
    remote: object = None  # what the tracking stores as ``remote`` when it changed
    result: JsonObject | None = None  # on a terminal phase
    anomaly: str | None = None
    anomaly_details: Mapping[str, object] | None = None
    next_run_at: float | None = None  # wall: the work will not move before this
    read_after: float | None = None  # wall: something is due then; read just after
    # (remote snapshot recording it as reported, occurrence) for each newly
    # finished occurrence, oldest first
    occurrences: Sequence[tuple[object, JsonObject]] = ()
    summary: Mapping[str, object] | None = None  # added to not_found/deadline results
    not_found_reason: str | None = None
    # A function job's whole budget as its body shows it (TimeoutSeconds x attempts plus
    # retry delays): what a tracking without the caller's deadline derives its own from.
    budget_s: float | None = None
    # Work the tracking waits for has not ended: a confirmed 404 does not end it yet.
    awaiting_work: bool = False
    # the terminal result still needs the handler's ``conclude`` (side reads)
    conclude: bool = False
    # Work of a class seen beside the tracking's own body (a schedule's newly ended and
    # still running occurrences): adaptive polling learns from and plans by it.
    class_work: Sequence[WorkSeen] = ()
    # The tracking's own work as its body shows it (class, own times): a status read.
    work: WorkTimes | None = None


class PollReads(NamedTuple):
    """What a poll's reads say, whatever they read: Judgement's first five fields
    (``Judgement(*polled, ...)``)."""

    label: str
    reads: Sequence[tuple[str, float]]
    answered: bool
    retry_after: float | None
    error: JsonObject | None


def poll_reads(label: str, reads: Sequence[ReadResult], trouble: ReadResult | None) -> PollReads:
    """A poll's reads as ``label`` judges them (``trouble``: the read that failed it)."""
    return PollReads(
        label if trouble is None else trouble.result,
        [(r.result, r.duration) for r in reads],
        bool(reads) and all(r.answered for r in reads),
        max((r.retry_after for r in reads if r.retry_after), default=None),
        None if trouble is None else trouble.error,
    )


class KindHandler(Protocol):
    def adopt(self, t: Tracking, client: WorkspaceClient) -> Adopted:
        """Take over a tracking (new or resumed) from what the store holds."""
        ...

    async def poll(self, target: PollTarget, client: WorkspaceClient) -> Judgement:
        """One poll: the requests it makes (never raising for the workspace's answers),
        and what they show, judged by the kind; nothing decided yet."""
        ...

    async def conclude(
        self, target: PollTarget, client: WorkspaceClient, judgement: Judgement
    ) -> JsonObject | None:
        """The terminal result, with whatever side reads it needs (never changes the outcome).

        By default the poll's own result: a handler that subclasses this needs no side reads.
        """
        return judgement.result
