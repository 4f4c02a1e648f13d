"""Request and response models of the HTTP API.

The same models validate requests and generate ``/openapi.json``.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from orchestrator.vocabulary import (
    CLASS_RE,
    FILTER_KINDS,
    KINDS,
    DeadlineSource,
    ErrorKind,
    Kind,
    NextPollReason,
    Outcome,
    TrackingState,
)

REMOTE_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,200}")
LABEL_KEY_RE = re.compile(r"[A-Za-z0-9_.-]{1,63}")
MAX_LABELS = 32
MAX_BATCH = 1000
# RFC 3339 date-time (section 5.6): a full date, T, a full time, a zone.
RFC3339_RE = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)


GROUP_RULE = "A group name: 1-200 characters of [A-Za-z0-9._:-], not dots alone; global."
MAX_GROUP_EXPECT = 1_000_000


def valid_remote_id(value: str) -> bool:
    # "." and ".." would change the route once substituted into the path.
    return bool(REMOTE_ID_RE.fullmatch(value)) and value.strip(".") != ""


def valid_rfc3339(value: str) -> bool:
    """An RFC 3339 date-time that names a real instant (no 30 February, no hour 24)."""
    if not RFC3339_RE.fullmatch(value):
        return False
    try:
        datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


class IntakeBody(BaseModel):
    """One tracking request."""

    model_config = ConfigDict(extra="forbid", strict=True)

    # Strict mode takes only members for an enum; JSON brings its value as a string.
    kind: Annotated[Kind, Field(strict=False)]
    remote_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description=(
            "The job or build id Moltaro returned (for kind schedule: the ScheduleId); "
            "[A-Za-z0-9._:-], not dots alone."
        ),
    )
    enqueue_response: dict[str, Any] | None = Field(
        default=None,
        description="The raw body Moltaro returned on enqueue or build submission.",
    )
    workspace: str = Field(default="default", min_length=1, max_length=64)
    deadline_at: datetime | None = Field(default=None)
    timeout_s: float | None = Field(default=None, gt=0)
    callback_url: str | None = Field(default=None, min_length=1, max_length=2048)
    labels: dict[str, str] = Field(default_factory=dict)
    correlation_id: str | None = Field(default=None, min_length=1, max_length=200)
    notify: Literal["terminal", "all"] = "terminal"
    # Work found by filter (kinds trigger_work, action_work: CONTRACT section 8).
    trigger_binding_id: str | None = Field(
        default=None, description="trigger_work: the entity trigger binding (TriggerBindingId)."
    )
    entity_id: str | None = Field(
        default=None, description="The record the trigger or entity action ran for."
    )
    filter_correlation_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="trigger_work: the platform's correlation id, matched through its search "
        "filter (correlation_id stays the caller's own tag).",
    )
    action_id: str | None = Field(default=None, description="action_work: the UI action.")
    job_id: str | None = Field(
        default=None,
        description="action_work: the JobId the action's enqueue answered "
        "(then without since and expect_jobs).",
    )
    since: datetime | None = Field(
        default=None,
        description="Only jobs created at or after it match (default: the intake time "
        "less polling.filter_skew_s).",
    )
    expect_jobs: int | None = Field(
        default=None, ge=1, le=100, description="How many matched jobs end the tracking (1)."
    )
    function_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description=(
            "Function jobs: the job's FunctionKey, a hint of its class for adaptive polling "
            "before the first read (the job's own wins)."
        ),
    )
    build_kind: Literal["Build", "Check"] | None = Field(
        default=None,
        description="Builds: the kind submitted, a hint of its class for adaptive polling.",
    )
    group: str | None = Field(default=None, description=GROUP_RULE)
    group_expect: int | None = Field(
        default=None,
        ge=1,
        le=MAX_GROUP_EXPECT,
        description="With group: the group seals itself once it has this many members "
        "(the first expect given stands).",
    )
    # Never refused: a malformed value is ignored (W3C Trace Context), so any JSON value.
    traceparent: Any = Field(
        default=None,
        description="W3C traceparent of this item, instead of the request's traceparent "
        "header (with its tracestate). Malformed: ignored, the item then has none.",
    )
    tracestate: Any = Field(
        default=None,
        description="W3C tracestate, read with this item's own traceparent.",
    )

    @field_validator("deadline_at", "since", mode="before")
    @classmethod
    def _deadline_text(cls, v: Any) -> Any:
        # strict mode refuses strings for datetimes; JSON can only carry text.
        if isinstance(v, str):
            try:
                parsed = datetime.fromisoformat(v.replace("Z", "+00:00").replace("z", "+00:00"))
            except ValueError:
                raise ValueError("must be an RFC 3339 timestamp") from None
            if parsed.tzinfo is None:
                raise ValueError("must carry a time zone (e.g. Z)")
            return parsed
        return v

    @field_validator("timeout_s", mode="before")
    @classmethod
    def _timeout_number(cls, v: Any) -> Any:
        if isinstance(v, bool):
            raise ValueError("must be a number of seconds")
        if isinstance(v, int):
            return float(v)
        return v

    @field_validator("remote_id", "trigger_binding_id", "entity_id", "action_id", "job_id")
    @classmethod
    def _remote_id(cls, v: str | None) -> str | None:
        if v is not None and not valid_remote_id(v):
            raise ValueError("must be 1-200 characters of [A-Za-z0-9._:-], not dots alone")
        return v

    @field_validator("filter_correlation_id")
    @classmethod
    def _printable(cls, v: str | None) -> str | None:
        if v is not None and (not v.isprintable() or v.strip() != v):
            raise ValueError("must be printable text without surrounding spaces")
        return v

    @field_validator("function_key")
    @classmethod
    def _function_key(cls, v: str | None) -> str | None:
        if v is not None and not CLASS_RE.fullmatch(v):
            raise ValueError("must be 1-200 characters of [A-Za-z0-9._:/@+-]")
        return v

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        if len(v) > MAX_LABELS:
            raise ValueError(f"at most {MAX_LABELS} labels")
        for key, value in v.items():
            if not LABEL_KEY_RE.fullmatch(key):
                raise ValueError("keys must be 1-63 characters of [A-Za-z0-9_.-]")
            if len(value) > 200:
                raise ValueError("values must be at most 200 characters")
        return v

    @model_validator(mode="after")
    def _either(self) -> IntakeBody:
        # Which fields each kind takes is the intake's to check (api/intake.py).
        by_filter = self.kind in FILTER_KINDS
        if not by_filter and self.remote_id is None and self.enqueue_response is None:
            raise ValueError("remote_id: one of remote_id or enqueue_response is required")
        if self.deadline_at is not None and self.timeout_s is not None:
            raise ValueError("timeout_s: give deadline_at or timeout_s, not both")
        takes = KINDS[self.kind].class_field
        if self.function_key is not None and takes != "function_key":
            raise ValueError("function_key: only for kind function_job")
        if self.build_kind is not None and takes != "build_kind":
            raise ValueError("build_kind: only for the build kinds")
        return self


# For /openapi.json only: the batch route checks each item on its own, to answer it in place.
class BatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[IntakeBody] = Field(min_length=1, max_length=MAX_BATCH)
    group: str | None = Field(
        default=None, description="The group of every item that names none. " + GROUP_RULE
    )
    seal: bool = Field(default=False, description="Seal the batch's group with it.")


class FollowUpsBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    workspace: str = Field(default="default", min_length=1, max_length=64)
    runtime_result: dict[str, Any]
    timeout_s: float | None = Field(default=None, gt=0)
    labels: dict[str, str] = Field(default_factory=dict)
    correlation_id: str | None = Field(default=None, min_length=1, max_length=200)
    callback_url: str | None = Field(default=None, min_length=1, max_length=2048)
    notify: Literal["terminal", "all"] = "terminal"
    group: str | None = Field(
        default=None,
        description="The follow-ups' group (default: a group of their own, named in the "
        "answer). " + GROUP_RULE,
    )
    seal: bool | None = Field(
        default=None, description="Seal the group with them (default: only a group of their own)."
    )


class LastError(BaseModel):
    kind: ErrorKind
    message: str
    status: int | None = None


class TrackingOut(BaseModel):
    """A tracking as the API answers it and as every event carries it in ``data``."""

    tracking_id: str
    workspace: str
    kind: Kind
    remote_id: str | None = Field(
        description="The job, build or schedule id; for work found by filter, the first "
        "matched job's id (null before one is seen)."
    )
    filter: dict[str, Any] | None = Field(
        default=None,
        description="trigger_work, action_work: the filter the work is found by (with the "
        "since in force); null for the other kinds.",
    )
    state: TrackingState
    outcome: Outcome | None
    remote_status: str | None
    remote: Any = Field(description="The last status body as received.")
    result: dict[str, Any] | None
    polls: int
    last_polled_at: str | None
    next_poll_at: str | None
    next_poll_reason: NextPollReason | None = Field(
        default=None,
        description="why the next read is due when it is (active trackings; null otherwise)",
    )
    last_error: LastError | None
    deadline_at: str
    deadline_source: DeadlineSource | None = Field(
        default=None,
        description=(
            "which rule set deadline_at: caller (deadline_at or timeout_s), derived (a function "
            "job's, from its TimeoutSeconds, attempts and retry delays once a read showed them) "
            "or default (polling.default_deadline_s); null for trackings stored by a build that "
            "did not keep it (such a deadline exactly default_deadline_s after intake is still "
            "derived, as intake's default would be)"
        ),
    )
    created_at: str
    terminal_at: str | None
    group: str | None = Field(default=None, description="The group it belongs to, if any.")
    labels: dict[str, str]
    correlation_id: str | None
    callback_url: str | None
    notify: Literal["terminal", "all"]


class TrackingPage(BaseModel):
    items: list[TrackingOut]
    next_cursor: str | None


class BatchItemOut(BaseModel):
    status: int
    tracking: TrackingOut | None = None
    problem: dict[str, Any] | None = None


class BatchOut(BaseModel):
    items: list[BatchItemOut]


class FollowUpsOut(BaseModel):
    items: list[TrackingOut]
    group: str = Field(description="The follow-ups' group: the one named, or their own.")


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None
    field: str | None = Field(default=None, description="The request field at fault.")


class WorkspaceProblemDetails(BaseModel):
    """What the workspace's own problem said: these members only, each bounded, and
    never the workspace token."""

    type: str | None = None
    title: str | None = None
    status: int | None = None
    detail: str | None = None
    errors: dict[str, list[str]] | None = None


class ForwardedProblem(Problem):
    """A problem about a request the service made to the workspace for the caller."""

    workspace_status: int | None = Field(
        default=None, description="The workspace's HTTP status; null when it did not answer."
    )
    workspace_problem: WorkspaceProblemDetails | None = Field(
        default=None, description="A 4xx answer's problem details, as the workspace gave them."
    )
    error_kind: ErrorKind | None = Field(
        default=None, description="502/503/504: what went wrong between us and the workspace."
    )


class CancelOut(BaseModel):
    tracking_id: str
    remote_status: str | None
    detail: str


class ReplayBody(BaseModel):
    """``POST /v1/deliveries/replay``: one sink, a seq range or a time range."""

    model_config = ConfigDict(extra="forbid", strict=True)

    sink: str = Field(min_length=1, max_length=200)
    after_seq: int | None = Field(default=None, ge=0)
    until_seq: int | None = Field(default=None, ge=0)
    since: Annotated[datetime | None, Field(strict=False)] = None
    until: Annotated[datetime | None, Field(strict=False)] = None

    @model_validator(mode="after")
    def _one_range(self) -> ReplayBody:
        by_seq = self.after_seq is not None or self.until_seq is not None
        by_time = self.since is not None or self.until is not None
        if by_seq and by_time:
            raise ValueError("since: give a seq range (after_seq, until_seq) or a time range")
        if not by_seq and not by_time:
            raise ValueError("after_seq: a seq range (after_seq) or a time range (since) is needed")
        if by_seq and self.after_seq is None:
            raise ValueError("after_seq: required with until_seq")
        if by_time and self.since is None:
            raise ValueError("since: required with until")
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise ValueError(f"{name}: must carry a time zone (RFC 3339)")
        after, until_seq = self.after_seq, self.until_seq
        if after is not None and until_seq is not None and until_seq < after:
            raise ValueError("until_seq: must not be below after_seq")
        if self.since is not None and self.until is not None and self.until < self.since:
            raise ValueError("until: must not be before since")
        return self
