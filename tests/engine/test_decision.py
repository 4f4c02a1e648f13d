"""decide() on its own: a pure function, so its rules hold for any state and answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.clock import iso
from orchestrator.config import PollingConfig
from orchestrator.engine.decision import STORE_DEADLINE, Decision, Write, decide
from orchestrator.engine.entry import PollState
from orchestrator.engine.learner import Learned
from orchestrator.interpret import Phase
from orchestrator.kinds.base import Judgement
from orchestrator.vocabulary import NextPollReason

P = PollingConfig()
NOW_W, NOW_M = 1_800_000_000.0, 5_000.0
EPS = 1e-6  # wall times near 1.8e9 convert to monotonic ones within a microsecond


@dataclass
class State:
    """A tracking as decide() reads it, with its poll state's fields set one by one."""

    remote_id: str = "J-1"
    notify: str = "all"
    created_at: float = NOW_W - 60
    remote_status: str | None = "Queued"
    fingerprint: str = "fp"
    digest: bytes | None = None
    delay: float | None = 4.0
    not_found_count: int = 0
    not_found_since: float = 0.0
    deadline: float = NOW_W + 3600
    deadline_mono: float = NOW_M + 3600
    last_error: dict[str, Any] | None = None
    anomaly: dict[str, Any] | None = None
    deadline_source: str | None = "caller"

    @property
    def state(self) -> PollState:
        return PollState(
            3, None, self.remote_status, self.fingerprint, self.digest, self.last_error,
            self.delay, self.not_found_count, self.not_found_since, self.anomaly, None,
            self.deadline, self.deadline_mono, self.deadline_source, None, self.created_at,
        )  # fmt: skip


def decide_(
    s: State, j: Judgement, now_w: float = NOW_W, now_m: float = NOW_M, draw: float = 0.5
) -> Decision:
    return decide(s, j, Learned(None, s.created_at, None), now_w, now_m, P, draw)


def due(d: Decision) -> float:
    assert d.next_read is not None
    return d.next_read.due


def outcome(d: Decision) -> str | None:
    return None if d.end is None else d.end.outcome


def result(d: Decision) -> dict[str, Any]:
    assert d.end is not None and d.end.result is not None
    return d.end.result


labels = st.sampled_from(["ok", "not_found", "timeout", "http_5xx", "rate_limited"])


@given(
    label=labels,
    retry_after=st.one_of(st.none(), st.floats(0.01, 5000)),
    next_run_in=st.one_of(st.none(), st.floats(-100, 5000)),
    deadline_in=st.floats(0.0, 5000),
    draw=st.floats(0.0, 0.999),
)
def test_the_next_read_is_never_after_the_deadline_nor_inside_a_wait(
    label: str,
    retry_after: float | None,
    next_run_in: float | None,
    deadline_in: float,
    draw: float,
) -> None:
    s = State(deadline_mono=NOW_M + deadline_in, deadline=NOW_W + deadline_in)
    phase = Phase.PENDING if label == "ok" else None
    next_run_at = None if next_run_in is None else NOW_W + next_run_in
    j = Judgement(label, (), retry_after=retry_after, phase=phase, fingerprint="fp",
                  next_run_at=next_run_at if phase else None)  # fmt: skip
    d = decide_(s, j, draw=draw)
    if s.deadline_mono <= NOW_M:
        assert outcome(d) == "deadline_exceeded"
        return
    if outcome(d) is not None:
        assert outcome(d) == "not_found" and label == "not_found"
        return
    assert NOW_M < due(d) <= s.deadline_mono
    if due(d) < s.deadline_mono:
        if retry_after is not None:
            assert due(d) >= NOW_M + retry_after - EPS
        if j.next_run_at is not None:
            assert due(d) >= NOW_M + next_run_in - EPS  # type: ignore[operator]
    else:
        assert d.next_read is not None and d.next_read.reason is NextPollReason.DEADLINE


def test_backoff_grows_by_the_multiplier_and_stops_at_the_cap() -> None:
    s = State(delay=20.0)
    j = Judgement("ok", (), unchanged=True)
    d = decide_(s, j)  # draw 0.5: no jitter either way
    assert d.state.delay == P.max_delay_s and due(d) == NOW_M + P.max_delay_s
    assert d.next_read is not None and d.next_read.reason is NextPollReason.BACKOFF
    assert not d.changed and not any(isinstance(e, Write) for e in d.effects)  # nothing new


def test_a_change_restarts_the_backoff_and_is_marked_changed() -> None:
    j = Judgement("ok", (), phase=Phase.PENDING, fingerprint="other", remote_status="Leased")
    d = decide_(State(delay=16.0), j)
    assert d.changed and d.state.delay == P.initial_delay_s
    assert d.effects[-1] == Write(None, True, True)  # stored, with a status_changed event
    quiet = decide_(State(delay=16.0, notify="terminal"), j)
    assert quiet.effects[-1] == Write(None, True, False)


@given(draw=st.floats(0.0, 0.999))
def test_jitter_stays_within_its_bounds(draw: float) -> None:
    d = decide_(State(delay=4.0), Judgement("ok", (), unchanged=True), draw=draw)
    assert 8.0 * (1 - P.jitter) - EPS <= due(d) - NOW_M <= 8.0 * (1 + P.jitter) + EPS


def test_a_terminal_phase_finishes_with_the_handlers_result() -> None:
    j = Judgement("ok", (), phase=Phase.FAILED, fingerprint="f2", result={"x": 1}, conclude=True)
    d = decide_(State(), j)
    assert d.end is not None and d.end == ("failed", {"x": 1}, True)
    assert d.next_read is None


def test_an_anomaly_keeps_polling() -> None:
    j = Judgement(
        "ok", (), phase=Phase.ANOMALY, fingerprint="f3", anomaly="completed_without_evidence"
    )
    d = decide_(State(), j)
    assert outcome(d) is None and due(d) > NOW_M


def test_a_deadline_while_failing_closed_says_why() -> None:
    s = State(remote_status="Completed", deadline_mono=NOW_M + 10, deadline=NOW_W + 10)
    details = {"missing_evidence": ["run.result_summary"]}
    anomalous = Judgement("ok", (), phase=Phase.ANOMALY, fingerprint="fp2",
                          remote_status="Completed", anomaly="completed_without_evidence",
                          anomaly_details=details)  # fmt: skip
    first = decide_(s, anomalous)
    assert first.end is None and first.state.anomaly is not None
    s.anomaly = first.state.anomaly
    # Transport trouble on the last read: still failing closed, and on what.
    trouble = Judgement("timeout", (), error={"kind": "timeout", "message": "read timed out"})
    late = decide_(s, trouble, NOW_W + 20, NOW_M + 20)
    assert outcome(late) == "deadline_exceeded"
    assert result(late)["failing_closed"] is True
    last = result(late)["last_anomaly"]
    assert last["reason"] == "completed_without_evidence"
    assert last["missing_evidence"] == ["run.result_summary"]
    assert last["remote_status"] == "Completed"
    assert last["first_seen_at"] == first.state.anomaly["first_seen_at"]
    assert result(late)["last_error"]["kind"] == "timeout"


def test_an_ordinary_answer_ends_failing_closed() -> None:
    s = State(anomaly={"reason": "unknown_status", "first_seen_at": "x", "last_seen_at": "x"})
    ordinary = Judgement("ok", (), phase=Phase.PENDING, fingerprint="fp", remote_status="Leased")
    d = decide_(s, ordinary)
    assert d.state.anomaly is None
    s.anomaly, s.deadline_mono = None, NOW_M
    ended = decide_(s, ordinary)
    assert result(ended)["failing_closed"] is False
    assert result(ended)["last_anomaly"] is None


def test_a_function_jobs_deadline_is_derived_once_from_its_budget() -> None:
    created = NOW_W - 30
    s = State(deadline_source="default", created_at=created)
    j = Judgement("ok", (), phase=Phase.PENDING, fingerprint="fp", remote_status="Leased",
                  budget_s=70.0)  # fmt: skip
    d = decide_(s, j)
    assert d.effects[0] == STORE_DEADLINE and d.state.deadline_source == "derived"
    assert d.state.deadline == created + 70.0 + P.deadline_margin_s
    assert due(d) <= NOW_M + (d.state.deadline - NOW_W) + EPS  # the next read is within it
    # A caller's deadline, or one already derived, is never replaced.
    for source in ("caller", "derived", None):
        kept = decide_(State(deadline_source=source), j)
        assert STORE_DEADLINE not in kept.effects and kept.state.deadline == State().deadline
    # Capped by polling.max_deadline_s; a derived deadline already past ends it now.
    huge = Judgement("ok", (), phase=Phase.PENDING, fingerprint="fp", budget_s=1e9)
    assert decide_(s, huge).state.deadline == created + P.max_deadline_s
    short = Judgement("ok", (), phase=Phase.PENDING, fingerprint="fp", budget_s=1.0)
    ended = decide_(State(deadline_source="default", created_at=NOW_W - 3600), short)
    assert outcome(ended) == "deadline_exceeded"
    assert result(ended)["deadline_at"] == iso(NOW_W - 3600 + 1.0 + P.deadline_margin_s)
