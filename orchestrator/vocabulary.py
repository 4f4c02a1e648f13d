"""The service's words, each defined once: kinds, outcomes, error kinds, poll results.

The API models, the store, the metrics, the client, the CLI and the demo import
them from here. Each is a ``StrEnum``: a member is its string
(``Kind.SCHEDULE == "schedule"``), so it serialises, formats and labels metrics
as that string, and code that still compares with plain strings keeps working.
This module imports nothing of the project, so every package may import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal


class Phase(StrEnum):
    """What the interpreter judged a status body to say (``interpret/``)."""

    PENDING = "pending"  # non-terminal: keep polling
    SUCCEEDED = "succeeded"  # terminal success, with the evidence
    FAILED = "failed"  # terminal non-success
    CANCELLED = "cancelled"  # terminal non-success
    ANOMALY = "anomaly"  # readable but breaks the contract: keep polling, count it
    INVALID = "invalid"  # not a status body at all: transport trouble (invalid_response)


TERMINAL_PHASES = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED})


class Kind(StrEnum):
    """What a tracking follows: a function job, a build of either project type, a
    schedule, or work found by filter (an entity trigger's jobs, a UI action's job)."""

    FUNCTION_JOB = "function_job"
    NET_OPERATION_BUILD = "net_operation_build"
    WORKSPACE_UI_BUILD = "workspace_ui_build"
    SCHEDULE = "schedule"
    TRIGGER_WORK = "trigger_work"
    ACTION_WORK = "action_work"


@dataclass(frozen=True, slots=True)
class KindSpec:
    """One kind, declared once: intake, the workspace client, the enum refresh, the
    metrics and the handler registry (``kinds/__init__.py``) are derived from these."""

    kind: Kind
    # status: one status route, judged by the interpreter; schedule: the schedule and
    # its occurrences; found: work found by filter through Function operations.
    family: Literal["status", "schedule", "found"]
    route: str | None  # the ``workspaces.paths`` key of its own route ({id}), if any
    enums: Kind | None  # whose OpenAPI enums judge its bodies
    class_field: Literal["function_key", "build_kind"] | None  # intake's class hint
    # A function job's: its body shows a budget (TimeoutSeconds x attempts) a deadline
    # is derived from, and its runs are read into its result.
    budget: bool = False
    run_history: bool = False


def _status_kind(
    kind: Kind, class_field: Literal["function_key", "build_kind"], job: bool = False
) -> KindSpec:
    """A kind read from its own status route (the ``paths`` key named as the kind);
    ``job``: a function job's budget and run history."""
    return KindSpec(kind, "status", kind.value, kind, class_field, budget=job, run_history=job)


KINDS: dict[Kind, KindSpec] = {
    spec.kind: spec
    for spec in (
        _status_kind(Kind.FUNCTION_JOB, "function_key", job=True),
        _status_kind(Kind.NET_OPERATION_BUILD, "build_kind"),
        _status_kind(Kind.WORKSPACE_UI_BUILD, "build_kind"),
        KindSpec(Kind.SCHEDULE, "schedule", "schedule", None, None),
        KindSpec(Kind.TRIGGER_WORK, "found", None, Kind.FUNCTION_JOB, None),
        KindSpec(Kind.ACTION_WORK, "found", None, Kind.FUNCTION_JOB, None),
    )
}

# The kinds whose id is read from one status route and judged by the interpreter.
STATUS_KINDS = tuple(k for k, spec in KINDS.items() if spec.family == "status")
# The kinds that have no id the caller was handed: named by the platform's
# filters, found through Function operations (CONTRACT section 8).
FILTER_KINDS = tuple(k for k, spec in KINDS.items() if spec.family == "found")
BUILD_KINDS = tuple(k for k, spec in KINDS.items() if spec.class_field == "build_kind")
# A build's own kind (its body's Kind): the work class of a build tracking.
BUILD_CLASSES = ("Build", "Check")
# A work class (a FunctionKey, a build kind) becomes a metric label value: printable,
# short, no spaces.
CLASS_RE = re.compile(r"[A-Za-z0-9._:/@+-]{1,200}")


class BuildReasonCode(StrEnum):
    """A failed build's ``Failure.ReasonCode`` as a bounded metric label; any other is OTHER."""

    STORAGE_CAPACITY_EXHAUSTED = "storage_capacity_exhausted"  # an operator frees storage
    PUBLICATION_COMMIT_UNCONFIRMED = "publication_commit_unconfirmed"  # an operator verifies
    COMPILATION_FAILED = "compilation_failed"
    CHECK_RULE_VIOLATION = "check_rule_violation"
    OTHER = "other"  # unknown codes, and failures without a Failure object

    @classmethod
    def label(cls, code: object) -> BuildReasonCode:
        if isinstance(code, str):
            for member in cls:
                if member is not cls.OTHER and member.value == code:
                    return member
        return cls.OTHER


class DeadlineSource(StrEnum):
    """Which rule set a tracking's ``deadline_at``."""

    CALLER = "caller"  # the intake's deadline_at or timeout_s
    DERIVED = "derived"  # a function job's, from the job's own timeout and retries
    DEFAULT = "default"  # polling.default_deadline_s (a function job's until a read shows it)


class TrackingState(StrEnum):
    """Active while it is polled; terminal once it has its outcome."""

    ACTIVE = "active"
    TERMINAL = "terminal"


class Outcome(StrEnum):
    """How a tracking ended; also the last word of its terminal event's type."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    NOT_FOUND = "not_found"
    ABANDONED = "abandoned"


class ErrorKind(StrEnum):
    """The kind of a tracking's last transport error: trouble, never terminal."""

    TIMEOUT = "timeout"
    CONNECTION = "connection"
    HTTP_5XX = "http_5xx"
    RATE_LIMITED = "rate_limited"
    UNAUTHORIZED = "unauthorized"
    INVALID_RESPONSE = "invalid_response"


class PollResult(StrEnum):
    """The ``result`` label of ``orchestrator_polls_total``: an answer or an ErrorKind."""

    OK = "ok"
    NOT_FOUND = "not_found"
    TIMEOUT = ErrorKind.TIMEOUT.value
    CONNECTION = ErrorKind.CONNECTION.value
    HTTP_5XX = ErrorKind.HTTP_5XX.value
    RATE_LIMITED = ErrorKind.RATE_LIMITED.value
    UNAUTHORIZED = ErrorKind.UNAUTHORIZED.value
    INVALID_RESPONSE = ErrorKind.INVALID_RESPONSE.value


class LeaseLoss(StrEnum):
    """Why a renewal found a lease no longer this replica's: the ``reason`` label of
    ``orchestrator_leases_lost_total``. The first two are churn, the last two trouble."""

    FINISHED = "finished"  # this replica's own terminal write crossed the renewal
    ENDED_ELSEWHERE = "ended_elsewhere"  # ended through another replica (a caller's abandon)
    TAKEN = "taken"  # another replica holds it: this one's lease had run out
    EXPIRED = "expired"  # it ran out before the renewal; nobody has claimed it yet


class NextPollReason(StrEnum):
    """Why a tracking's next read is due when it is."""

    FIRST_READ = "first_read"  # after intake or a restart
    BACKOFF = "backoff"  # the growing delay between reads of unchanged work
    ADAPTIVE = "adaptive"  # when the work's class is likely to have ended
    NEXT_RUN_AT = "next_run_at"  # a queued job waits for its NextRunAt
    RETRY_AFTER = "retry_after"  # the workspace asked us to wait (429/503)
    NOT_FOUND_CONFIRMATION = "not_found_confirmation"  # a 404 to be confirmed
    DEADLINE = "deadline"  # the tracking's deadline comes before any other reason
