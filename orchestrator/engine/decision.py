"""The decision half of a poll: (tracking state, judgement, now) -> decision. Pure.

No I/O, no clock, no randomness of its own (the jitter's uniform draw, or the
random source, is passed in), so every rule of a poll is tested here without a
server or a sleep. The engine applies the decision in one place (``Engine._apply``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Protocol

from orchestrator.clock import iso
from orchestrator.config import PollingConfig
from orchestrator.interpret import TERMINAL_PHASES
from orchestrator.kinds.base import Judgement
from orchestrator.vocabulary import DeadlineSource, NextPollReason, Outcome
from orchestrator.workfilter import shown_id


class PollState(Protocol):
    """The tracking state a decision reads (the engine's entry)."""

    remote_id: str
    created_at: float
    remote_status: str | None
    fingerprint: str
    digest: bytes | None
    delay: float | None
    not_found_count: int
    not_found_since: float
    deadline: float
    deadline_mono: float
    deadline_source: str | None
    last_error: dict[str, Any] | None
    anomaly: dict[str, Any] | None  # while failing closed: the last contract anomaly


# Two wall times this close are one instant of intake (float arithmetic, not a caller).
SAME_INSTANT_S = 1e-3


def defaulted(s: PollState, p: PollingConfig) -> bool:
    """Whether the deadline is ``polling.default_deadline_s``'s, which a function job's
    own budget then replaces. A row stored by a build that did not record the source
    (NULL: before migration 005 on SQLite, 002 on PostgreSQL, or an old replica still
    running mid-upgrade) is judged by intake's rule from what it kept: only the
    default deadline lies exactly that far after intake; anything else was a caller's."""
    if s.deadline_source is not None:
        return s.deadline_source == DeadlineSource.DEFAULT
    return abs(s.deadline - s.created_at - p.default_deadline_s) < SAME_INSTANT_S


@dataclass(slots=True)
class Decision:
    """What to do after one poll, and the tracking's state after it.

    ``outcome`` set: finish the tracking with ``result`` (``conclude``: the kind
    handler completes the result first). Otherwise read again at monotonic
    ``due`` for ``reason``.
    """

    fingerprint: str
    digest: bytes | None
    remote_status: str | None
    last_error: dict[str, Any] | None
    not_found_count: int
    not_found_since: float
    delay: float | None = None
    due: float = 0.0
    reason: NextPollReason = NextPollReason.BACKOFF
    outcome: str | None = None
    result: dict[str, Any] | None = None
    conclude: bool = False
    anomaly: dict[str, Any] | None = None
    deadline: float | None = None  # a deadline derived now from the job (wall time)
    changed: bool = False  # the remote state changed: store it, restart the backoff
    status_moved: bool = False  # the remote status changed (a status_changed event)


def deadline_result(
    s: PollState, last_error: dict[str, Any] | None, deadline: float | None = None
) -> dict[str, Any]:
    """What a tracking that ran out of time reports: the id, the latest state and,
    when it was failing closed, why (``last_anomaly``: the reason, missing evidence)."""
    return {
        "remote_id": shown_id(s.remote_id),
        "last_remote_status": s.remote_status,
        "last_error": last_error,
        "deadline_at": iso(s.deadline if deadline is None else deadline),
        "failing_closed": s.anomaly is not None,
        "last_anomaly": s.anomaly,
    }


def _anomaly(previous: dict[str, Any] | None, j: Judgement, now_w: float) -> dict[str, Any]:
    """The anomaly a judged answer shows, dated from when that reason was first seen."""
    details = j.anomaly_details or {}
    same = previous is not None and previous.get("reason") == j.anomaly
    out = {
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
    s: PollState,
    j: Judgement,
    now_w: float,
    now_m: float,
    p: PollingConfig,
    draw: float,
    planned: float | None = None,
) -> Decision:
    """The next step for a tracking in state ``s`` after a poll judged ``j``.

    ``draw`` is a uniform number in [0, 1) for the jitter; wall times (the
    judgement's) become monotonic ones by ``now_m - now_w``. ``planned`` is
    adaptive polling's read (monotonic; ``engine/adaptive.py``), taken instead
    of the backoff; every other rule below still wins over it.
    """
    d = Decision(
        s.fingerprint, s.digest, s.remote_status, j.error, s.not_found_count, s.not_found_since
    )
    d.anomaly = s.anomaly
    deadline_mono = s.deadline_mono
    if j.budget_s is not None and defaulted(s, p):
        # No deadline from the caller: the job's own budget, from the intake time.
        d.deadline = s.created_at + min(j.budget_s + p.deadline_margin_s, p.max_deadline_s)
        deadline_mono = d.deadline + (now_m - now_w)
    if j.label == "not_found":
        if d.not_found_count == 0:
            d.not_found_since = now_w
        d.not_found_count += 1
        confirmed = d.not_found_count >= p.not_found_confirmations
        if confirmed and now_w - d.not_found_since >= p.not_found_min_s and not j.awaiting_work:
            d.outcome = Outcome.NOT_FOUND
            d.result = {"remote_id": shown_id(s.remote_id)}
            if j.not_found_reason is not None:
                d.result["reason"] = j.not_found_reason
            d.result.update(
                confirmations=d.not_found_count,
                first_not_found_at=iso(d.not_found_since),
                last_not_found_at=iso(now_w),
                **(j.summary or {}),
            )
            return d
    elif j.label == "ok":
        d.not_found_count = 0
    if j.phase is not None:
        d.changed = j.fingerprint != s.fingerprint
        d.status_moved = j.remote_status != s.remote_status
        d.fingerprint, d.digest, d.remote_status = j.fingerprint, j.digest, j.remote_status
        # A judged answer says whether the tracking is failing closed now.
        d.anomaly = None if j.anomaly is None else _anomaly(s.anomaly, j, now_w)
        if j.phase in TERMINAL_PHASES:
            d.outcome, d.result, d.conclude = j.phase.value, j.result, j.conclude
            return d
    if now_m >= deadline_mono:
        d.outcome = Outcome.DEADLINE_EXCEEDED
        d.result = {**deadline_result(s, d.last_error, d.deadline), **(j.summary or {})}
        return d

    d.delay = next_delay(
        None if d.changed else s.delay, p.initial_delay_s, p.multiplier, p.max_delay_s
    )
    due = now_m + d.delay * (1.0 + p.jitter * (2.0 * draw - 1.0))
    reason = NextPollReason.BACKOFF
    if planned is not None:
        # The backoff restarts from its first delay should the plan run out.
        d.delay = None
        due, reason = min(max(planned, now_m), now_m + p.max_delay_s), NextPollReason.ADAPTIVE
    to_mono = now_m - now_w
    if j.label == "not_found" and not j.awaiting_work:
        # Backoff must not stretch the confirmation window far past its minimum.
        # The next read confirms the 404 (or not), whichever time it falls at.
        soon = now_m + max(d.not_found_since + p.not_found_min_s - now_w, p.initial_delay_s)
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
    d.due, d.reason = due, reason
    return d


# -- backoff ------------------------------------------------------------------------------


def next_delay(current: float | None, initial: float, multiplier: float, maximum: float) -> float:
    """The next delay before jitter: starts at ``initial`` and grows to ``maximum``.

    ``current`` is None after the remote status changed, which restarts the
    progression: a job that just moved is likely to move again soon.
    """
    if current is None:
        return initial
    return min(current * multiplier, maximum)


def jittered(delay: float, jitter: float, rng: random.Random) -> float:
    """Spread by ±jitter so that trackings created together do not poll together."""
    if jitter <= 0:
        return delay
    return delay * rng.uniform(1.0 - jitter, 1.0 + jitter)
