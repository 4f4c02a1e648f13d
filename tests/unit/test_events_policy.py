import random
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from orchestrator.clock import parse_retry_after
from orchestrator.events.attempt import RetryPolicy

T0 = 1_700_000_000.0


def policy(schedule: list[float] | None = None, max_age_s: float = 86400) -> RetryPolicy:
    return RetryPolicy(schedule or [5, 30, 120, 600, 1800, 3600], max_age_s, random.Random(7))


@pytest.mark.parametrize("status", [200, 201, 202, 204, 299])
def test_any_2xx_is_delivered(status: int) -> None:
    d = policy().after_response(status, None, 1, T0, T0 + 1)
    assert d.result == "delivered" and d.status == status


def test_410_is_dead_at_once() -> None:
    d = policy().after_response(410, None, 1, T0, T0 + 1)
    assert d.result == "dead" and d.status == 410


@pytest.mark.parametrize("status", [301, 302, 307, 308, 400, 401, 404, 408, 500, 502, 504])
def test_other_statuses_retry_on_the_schedule(status: int) -> None:
    d = policy().after_response(status, None, 1, T0, T0)
    assert d.result == "retry"
    assert d.next_attempt_at is not None and 4.0 <= d.next_attempt_at - T0 <= 6.0
    assert d.error is not None and str(status) in d.error


def test_schedule_grows_with_jitter_and_the_last_delay_repeats() -> None:
    p = policy()
    for attempt, base in [(1, 5), (2, 30), (3, 120), (4, 600), (5, 1800), (6, 3600), (9, 3600)]:
        delays = [p.delay(attempt) for _ in range(200)]
        assert all(0.8 * base <= x <= 1.2 * base for x in delays)
        assert max(delays) - min(delays) > 0.1 * base  # jitter is really applied


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_seconds_is_obeyed_without_jitter(status: int) -> None:
    d = policy().after_response(status, "90", 1, T0, T0 + 10)
    assert d.result == "retry" and d.next_attempt_at == T0 + 100


def test_retry_after_http_date() -> None:
    when = datetime.fromtimestamp(T0 + 120, UTC)
    d = policy().after_response(503, format_datetime(when, usegmt=True), 1, T0, T0)
    assert d.next_attempt_at == pytest.approx(T0 + 120)


def test_retry_after_on_a_500_is_ignored() -> None:
    d = policy().after_response(500, "900", 1, T0, T0)
    assert d.next_attempt_at is not None and d.next_attempt_at - T0 < 10


def test_unreadable_retry_after_falls_back_to_the_schedule() -> None:
    d = policy().after_response(429, "soon", 1, T0, T0)
    assert d.next_attempt_at is not None and 4.0 <= d.next_attempt_at - T0 <= 6.0


def test_parse_retry_after() -> None:
    assert parse_retry_after(None, T0) is None
    assert parse_retry_after(" 7 ", T0) == 7
    assert parse_retry_after("-3", T0) is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", T0) == 0.0  # in the past


def test_dead_once_the_next_attempt_would_pass_max_age() -> None:
    p = policy([10], max_age_s=100)
    assert p.after_error("timeout", 3, T0, T0 + 50).result == "retry"
    d = p.after_error("timeout", 9, T0, T0 + 95)
    assert d.result == "dead" and d.error is not None and "max age" in d.error


def test_retry_after_beyond_max_age_is_dead() -> None:
    d = policy(max_age_s=100).after_response(429, "3600", 1, T0, T0 + 1)
    assert d.result == "dead" and d.status == 429


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_overload_answers_throttle_the_sink_until_their_retry_after(status: int) -> None:
    d = policy().after_response(status, "40", 1, T0, T0)
    assert d.result == "retry" and d.throttle and d.next_attempt_at == T0 + 40
    plain = policy().after_response(status, None, 1, T0, T0)
    assert plain.throttle and plain.next_attempt_at is not None  # the schedule's next delay


@pytest.mark.parametrize("status", [400, 404, 500, 501])
def test_other_failures_wait_for_that_event_only(status: int) -> None:
    assert not policy().after_response(status, "40", 1, T0, T0).throttle
