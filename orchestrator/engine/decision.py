"""The decision half of a poll: (state, judgement, plan, now) -> (next state, effects). Pure.

No I/O, no clock, no randomness of its own (the jitter's uniform draw, or the
random source, is passed in), so every rule of a poll is tested here without a
server or a sleep. The engine replaces the entry's state with the next one and
carries the effects out, in order, in one place (``Engine._apply``).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, NamedTuple, Protocol

from orchestrator.clock import iso
from orchestrator.config import PollingConfig
from orchestrator.engine.entry import PollState
from orchestrator.kinds.base import JsonObject, Judgement
from orchestrator.vocabulary import TERMINAL_PHASES, DeadlineSource, NextPollReason, Outcome
from orchestrator.workfilter import shown_id

if TYPE_CHECKING:
    from orchestrator.engine.learner import Learned


class Tracked(Protocol):
    """What a decision reads of a tracking (the engine's entry)."""

    @property
    def remote_id(self) -> str: ...
    @property
    def created_at(self) -> float: ...
    @property
    def notify(self) -> str: ...
    @property
    def state(self) -> PollState: ...


# Two wall times this close are one instant of intake (float arithmetic, not a caller).
SAME_INSTANT_S = 1e-3


def defaulted(s: PollState, created_at: float, p: PollingConfig) -> bool:
    """Whether the deadline is ``polling.default_deadline_s``'s, which a function job's
    own budget then replaces. A row stored by a build that did not record the source
    (NULL: before migration 005 on SQLite, 002 on PostgreSQL, or an old replica still
    running mid-upgrade) is judged by intake's rule from what it kept: only the
    default deadline lies exactly that far after intake; anything else was a caller's."""
    if s.deadline_source is not None:
        return s.deadline_source == DeadlineSource.DEFAULT
    return abs(s.deadline - created_at - p.default_deadline_s) < SAME_INSTANT_S


# -- effects: what the engine does with a decision, in the order given ---------------------


class StoreDeadline(NamedTuple):
    """A deadline derived from the job: stored before anything else."""


class Report(NamedTuple):
    """A schedule's newly finished occurrence: its event, stored with ``snapshot``
    (the tracking's ``remote`` recording it as reported) in one transaction."""

    snapshot: object
    occurrence: JsonObject


class End(NamedTuple):
    """Finish the tracking (``conclude``: the kind handler completes the result first)."""

    outcome: str
    result: JsonObject | None
    conclude: bool = False


class ReadAt(NamedTuple):
    """Read again at monotonic ``due``, for ``reason``."""

    due: float
    reason: NextPollReason


class Write(NamedTuple):
    """Store the poll's result (``remote`` when ``changed``), with a status_changed
    event when ``status_event``."""

    remote: object
    changed: bool
    status_event: bool


Effect = StoreDeadline | Report | End | ReadAt | Write
STORE_DEADLINE = StoreDeadline()


class Decision(NamedTuple):
    """The tracking's next state and what to do, in order. ``changed``: the remote
    state changed (a new body, read for the first time)."""

    state: PollState
    effects: list[Effect]
    changed: bool

    @property
    def end(self) -> End | None:
        last = self.effects[-1] if self.effects else None
        return last if isinstance(last, End) else None

    @property
    def next_read(self) -> ReadAt | None:
        return next((e for e in self.effects if isinstance(e, ReadAt)), None)


def deadline_result(remote_id: str, s: PollState) -> JsonObject:
    """What a tracking that ran out of time reports: the id, the latest state and,
    when it was failing closed, why (``last_anomaly``: the reason, missing evidence)."""
    return {
        "remote_id": shown_id(remote_id),
        "last_remote_status": s.remote_status,
        "last_error": s.last_error,
        "deadline_at": iso(s.deadline),
        "failing_closed": s.anomaly is not None,
        "last_anomaly": s.anomaly,
        **(s.summary or {}),
    }


def _anomaly(previous: JsonObject | None, j: Judgement, now_w: float) -> JsonObject:
    """The anomaly a judged answer shows, dated from when that reason was first seen."""
    details = j.anomaly_details or {}
    same = previous is not None and previous.get("reason") == j.anomaly
    out: JsonObject = {
        "reason": j.anomaly,
        "remote_status": j.remote_status,
        "missing_evidence": details.get("missing_evidence"),
        "first_seen_at": previous["first_seen_at"] if same and previous else iso(now_w),
        "last_seen_at": iso(now_w),
    }
    if details.get("job_id") is not None:  # a schedule's occurrence
        out["job_id"] = details["job_id"]
    return out


def decide(
    e: Tracked,
    j: Judgement,
    plan: Learned,
    now_w: float,
    now_m: float,
    p: PollingConfig,
    draw: float,
) -> Decision:
    """The next state of tracking ``e`` after a poll judged ``j``, and what to do.

    ``plan`` is what adaptive polling learned from the read: the work's class and
    start, and its planned next read (monotonic; ``engine/plan.py``), taken
    instead of the backoff (every other rule below still wins over it). ``draw``
    is a uniform number in [0, 1) for the jitter; wall times (the judgement's)
    become monotonic ones by ``now_m - now_w``.
    """
    s = e.state
    effects: list[Effect] = []
    deadline, deadline_mono, deadline_source = s.deadline, s.deadline_mono, s.deadline_source
    if j.budget_s is not None and defaulted(s, e.created_at, p):
        # No deadline from the caller: the job's own budget, from the intake time.
        deadline = e.created_at + min(j.budget_s + p.deadline_margin_s, p.max_deadline_s)
        deadline_mono, deadline_source = deadline + (now_m - now_w), DeadlineSource.DERIVED
        effects.append(STORE_DEADLINE)
    if j.occurrences:
        effects += [Report(snapshot, occurrence) for snapshot, occurrence in j.occurrences]
    not_found_count, not_found_since = s.not_found_count, s.not_found_since
    fingerprint, digest, status, anomaly = s.fingerprint, s.digest, s.remote_status, s.anomaly
    changed = status_moved = False
    end: End | None = None
    if j.label == "not_found":
        if not_found_count == 0:
            not_found_since = now_w
        not_found_count += 1
        confirmed = not_found_count >= p.not_found_confirmations
        if confirmed and now_w - not_found_since >= p.not_found_min_s and not j.awaiting_work:
            result: JsonObject = {"remote_id": shown_id(e.remote_id)}
            if j.not_found_reason is not None:
                result["reason"] = j.not_found_reason
            result.update(
                confirmations=not_found_count,
                first_not_found_at=iso(not_found_since),
                last_not_found_at=iso(now_w),
                **(j.summary or {}),
            )
            end = End(Outcome.NOT_FOUND, result)
    elif j.label == "ok":
        not_found_count = 0
    if end is None and j.phase is not None:
        changed = j.fingerprint != s.fingerprint
        status_moved = j.remote_status != s.remote_status
        fingerprint, digest, status = j.fingerprint, j.digest, j.remote_status
        # A judged answer says whether the tracking is failing closed now.
        anomaly = None if j.anomaly is None else _anomaly(s.anomaly, j, now_w)
        if j.phase in TERMINAL_PHASES:
            end = End(j.phase.value, j.result, j.conclude)
    delay, due, reason = s.delay, 0.0, NextPollReason.BACKOFF
    expired = end is None and now_m >= deadline_mono
    if end is None and not expired:
        # The backoff starts at the initial delay and grows to the maximum; a change of
        # remote state restarts it (a job that just moved is likely to move again soon).
        # A tracking adaptive's plan lets go of joins it at the pace it has at the
        # work's age (``Learned.rejoin``).
        if s.delay is None and plan.rejoin is not None:
            backoff = max(plan.rejoin, p.initial_delay_s)  # leaving adaptive's plan
        elif changed or s.delay is None:
            backoff = p.initial_delay_s
        else:
            backoff = min(s.delay * p.multiplier, p.max_delay_s)
        delay, due = backoff, now_m + backoff * (1.0 + p.jitter * (2.0 * draw - 1.0))
        # A tracking the plan let go of (it outlived its class) stays on the backoff:
        # taken back each time the grid grows, it would start the backoff again and
        # again. One whose class the first read showed (polls <= 1) may join it, and
        # a schedule plans each occurrence it sees running afresh.
        if plan.due is not None and (s.delay is None or s.polls <= 1 or plan.beside):
            delay = None  # should the plan run out, the backoff goes on from rejoin
            due = min(max(plan.due, now_m), now_m + p.max_delay_s)
            reason = NextPollReason.ADAPTIVE
        to_mono = now_m - now_w
        if j.label == "not_found" and not j.awaiting_work:
            # Backoff must not stretch the confirmation window far past its minimum.
            # The next read confirms the 404 (or not), whichever time it falls at.
            soon = now_m + max(not_found_since + p.not_found_min_s - now_w, p.initial_delay_s)
            due, reason = min(due, soon), NextPollReason.NOT_FOUND_CONFIRMATION
        if j.read_after is not None:
            just_after = max(j.read_after + to_mono, now_m) + p.initial_delay_s
            if just_after < due:
                due, reason = just_after, NextPollReason.NEXT_RUN_AT
        if j.next_run_at is not None and j.next_run_at + to_mono > due:
            due, reason = j.next_run_at + to_mono, NextPollReason.NEXT_RUN_AT
        if j.retry_after is not None and now_m + j.retry_after > due:
            due, reason = now_m + j.retry_after, NextPollReason.RETRY_AFTER
        if due >= deadline_mono:
            due, reason = deadline_mono, NextPollReason.DEADLINE
    # Positional, in PollState's order: a third of the cost of keywords, once per poll.
    state = PollState(
        s.polls + 1,  # polls
        now_w,  # last_polled_at
        status,  # remote_status
        fingerprint,
        digest,
        j.error,  # last_error
        delay,
        not_found_count,  # not_found_count
        not_found_since,  # not_found_since
        anomaly,
        j.summary or s.summary,  # summary: transport trouble keeps the last
        deadline,
        deadline_mono,
        deadline_source,
        plan.work_class,
        plan.started,
    )
    if expired:
        end = End(Outcome.DEADLINE_EXCEEDED, deadline_result(e.remote_id, state))
    if end is not None:
        effects.append(end)
        return Decision(state, effects, changed)
    effects.append(ReadAt(due, reason))
    status_event = status_moved and e.notify == "all"
    # A read that changed nothing is not written: the counters live in the entry (the API
    # shows them) and are checkpointed at shutdown and with the terminal state.
    if changed or status_event or j.error != s.last_error:
        effects.append(Write(j.remote if changed else None, changed, status_event))
    return Decision(state, effects, changed)


# -- backoff ------------------------------------------------------------------------------


def jittered(delay: float, jitter: float, rng: random.Random) -> float:
    """Spread by ±jitter so that trackings created together do not poll together."""
    if jitter <= 0:
        return delay
    return delay * rng.uniform(1.0 - jitter, 1.0 + jitter)
