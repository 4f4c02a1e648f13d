"""From an intake body to a tracking ready to store, or a problem naming the field.

Work found by filter (``trigger_work``, ``action_work``: CONTRACT section 8):
which fields each kind takes, the key the tracking is stored under (see
``workfilter.py``), the ``since`` in force, and a 422 for a filter the
workspace's OpenAPI document does not declare on the Function operations jobs
route. The id kinds refuse these fields, naming the first one given.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from datetime import UTC
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from orchestrator import tracing
from orchestrator.api.models import (
    GROUP_RULE,
    MAX_BATCH,
    FollowUpsBody,
    IntakeBody,
    valid_remote_id,
)
from orchestrator.api.problems import invalid, validated
from orchestrator.clock import iso
from orchestrator.config import Settings, WorkspaceConfig
from orchestrator.interpret import extract_polling_url, extract_remote_id, polling_url_matches
from orchestrator.store.base import NewTracking
from orchestrator.tracecontext import TraceContext, received
from orchestrator.vocabulary import FILTER_KINDS, DeadlineSource, Kind
from orchestrator.workfilter import WorkFilter

if TYPE_CHECKING:
    from opentelemetry.trace import Span
    from prometheus_client import Counter

    from orchestrator.interpret.filters import FilterNames

log = logging.getLogger("orchestrator.api")

# Intake field -> the filter it is sent as on the jobs route.
SENT_AS = {
    "trigger_binding_id": "trigger_binding_id",
    "entity_id": "entity_id",
    "filter_correlation_id": "search",
    "action_id": "action_id",
    "since": "from",
}
_ONLY_FILTER_KINDS = (*SENT_AS, "job_id", "expect_jobs")
# What each kind found by filter needs, said when it is given an id instead.
_NEEDS = {
    Kind.TRIGGER_WORK: "give trigger_binding_id and entity_id or filter_correlation_id",
    Kind.ACTION_WORK: "give action_id (with entity_id for an entity action) or job_id",
}
DeclaredNames = Callable[[str], "FilterNames | None"]


class TrackingIds:
    """``trk_`` + a millisecond (48 bits) + 48 bits, in hex, strictly increasing here.

    Time first: each new id sorts after the ones before it, so the indexes on
    ``tracking_id`` grow at their right edge instead of a random page per insert,
    and a batch's commit writes a few pages to the WAL rather than one per row.
    The low bits start at random in each millisecond (apart across replicas) and
    count up within one, as ULIDs do; a clock that steps back keeps the last
    millisecond. An id names a row and grants nothing: it need not be secret.
    """

    def __init__(self, clock_ns: Callable[[], int] = time.time_ns) -> None:
        self._clock_ns = clock_ns
        self._random = random.Random()  # seeded from os.urandom
        self._ms = -1
        self._low = 0

    def __call__(self) -> str:
        ms = self._clock_ns() // 1_000_000
        if ms > self._ms:
            self._ms, self._low = ms, self._random.getrandbits(47)  # room to count up
        else:
            self._low += 1
            if self._low >= 1 << 48:
                self._ms, self._low = self._ms + 1, self._random.getrandbits(47)
        return f"trk_{self._ms:012x}{self._low:012x}"


new_tracking_id = TrackingIds()


def callback_allowed(url: str, allowlist: list[str]) -> bool:
    """True when ``url`` is a plain http(s) URL under one allowlist prefix.

    A bare ``startswith`` would let ``http://sink@evil/`` or
    ``http://sink.evil/`` through a prefix ``http://sink``: the match must end
    at a path boundary and the URL must carry no userinfo.
    """
    if any(c in url for c in "\r\n\t \\") or not url.isprintable():
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
        return False
    # The HTTP client normalises dot segments before sending, so "/tenant-a/../admin"
    # would leave the allowed prefix: refuse them, percent-encoded ones included.
    if any(seg in (".", "..") for seg in unquote(parts.path).split("/")):
        return False
    for prefix in allowlist:
        if not prefix or not url.startswith(prefix):
            continue
        rest = url[len(prefix) :]
        if prefix.endswith("/") or rest == "" or rest[0] in "/?#":
            return True
    return False


class TraceIntake:
    """A request's W3C trace context: its headers', and each item's own instead when
    it carries a ``traceparent``. Malformed values are ignored and counted, never refused."""

    def __init__(self, headers: Mapping[str, str], ignored: Counter) -> None:
        self._ignored = ignored
        self.header = self._read(headers.get("traceparent"), headers.get("tracestate"))

    def _read(self, traceparent: object, tracestate: object) -> TraceContext | None:
        got = received(
            None if traceparent is None else traceparent if isinstance(traceparent, str) else "",
            None if tracestate is None else tracestate if isinstance(tracestate, str) else "",
        )
        for field in got.malformed:
            self._ignored.labels(field=field).inc()
        return got.context

    def caller(self) -> tuple[str | None, str | None]:
        h = self.header
        return (None, None) if h is None else (h.traceparent, h.tracestate)

    def continue_in(self, span: Span | None) -> None:
        """The intake's own span (tracing on): its context is what items without one
        of their own store, so their polls and ending join the intake's trace."""
        own = None if span is None else tracing.context_of(span)
        if own is not None:
            self.header = TraceContext(*own)

    def of(self, body: IntakeBody) -> TraceContext | None:
        if body.traceparent is None:
            return self.header
        return self._read(body.traceparent, body.tracestate)


def validate_intake(
    raw: Any,
    settings: Settings,
    now: float,
    declared: DeclaredNames | None = None,
    trace: TraceIntake | None = None,
) -> NewTracking:
    """``declared(workspace)``: the filter names its OpenAPI document declares (None:
    not known here), for work found by filter; ``trace``: the request's trace context."""
    body = validated(IntakeBody, raw)
    workspace = settings.workspace(body.workspace)
    if workspace is None:
        raise invalid("workspace", f"unknown workspace {body.workspace!r}")
    remote: Any = None
    if body.kind in FILTER_KINDS:
        names = None if declared is None else declared(workspace.name)
        remote_id, remote = filter_intake(body, now, settings.polling.filter_skew_s, names)
    else:
        # An id kind names its work by remote_id: the filter fields are not for it.
        only = f"only {' and '.join(FILTER_KINDS)} take it, not {body.kind.value}"
        _refuse(body, _ONLY_FILTER_KINDS, only)
        remote_id = _remote_id(body, workspace)
    deadline, source = _deadline(body, settings, now)
    if body.callback_url is not None and not callback_allowed(
        body.callback_url, settings.events.callback_allowlist
    ):
        raise invalid("callback_url", "not under any entry of events.callback_allowlist")
    context = None if trace is None else trace.of(body)
    if body.group is not None and not valid_remote_id(body.group):
        raise invalid("group", GROUP_RULE)
    if body.group_expect is not None and body.group is None:
        raise invalid("group_expect", "is given only with group")
    return NewTracking(
        tracking_id=new_tracking_id(),
        workspace=workspace.name,
        kind=body.kind.value,  # a plain string: the engine interns it
        remote_id=remote_id,
        deadline_at=deadline,
        created_at=now,
        next_poll_at=now + settings.polling.initial_delay_s,
        labels=body.labels,
        correlation_id=body.correlation_id,
        callback_url=body.callback_url,
        notify=body.notify,
        deadline_source=source,
        remote=remote,
        work_class=body.function_key or body.build_kind,
        traceparent=None if context is None else context.traceparent,
        tracestate=None if context is None else context.tracestate,
        group_name=body.group,
        group_expect=body.group_expect,
    )


def _remote_id(body: IntakeBody, workspace: WorkspaceConfig) -> str:
    if body.enqueue_response is None:
        assert body.remote_id is not None  # the model requires one of the two
        return body.remote_id
    if body.kind is Kind.SCHEDULE:
        # Creating a schedule enqueues nothing: there is no enqueue response to take an id from.
        raise invalid("enqueue_response", "a schedule tracking takes remote_id (the ScheduleId)")
    found = extract_remote_id(body.enqueue_response)
    if found is None:
        raise invalid("enqueue_response", "carries no JobId or Id")
    if not valid_remote_id(found):
        raise invalid("enqueue_response", "its id is not 1-200 characters of [A-Za-z0-9._:-]")
    if body.remote_id is not None and body.remote_id != found:
        raise invalid("remote_id", "does not match the id in enqueue_response")
    url = extract_polling_url(body.enqueue_response)
    template = workspace.paths.route(body.kind)
    if url is not None and not polling_url_matches(url, workspace.base_url, template, found):
        raise invalid(
            "enqueue_response", "its polling URL does not resolve to this workspace's status route"
        )
    return found


def _deadline(body: IntakeBody, settings: Settings, now: float) -> tuple[float, DeadlineSource]:
    """The deadline and the rule that set it. Without one from the caller, a function
    job's is derived from the job by the engine once a read shows it (CONTRACT 3)."""
    polling = settings.polling
    if body.deadline_at is not None:
        deadline = body.deadline_at.timestamp()
        if deadline <= now:
            raise invalid("deadline_at", "is in the past")
        if deadline - now > polling.max_deadline_s:
            raise invalid("deadline_at", "is beyond polling.max_deadline_s")
        return deadline, DeadlineSource.CALLER
    if body.timeout_s is not None:
        if body.timeout_s > polling.max_deadline_s:
            raise invalid("timeout_s", "is beyond polling.max_deadline_s")
        return now + body.timeout_s, DeadlineSource.CALLER
    return now + polling.default_deadline_s, DeadlineSource.DEFAULT


def follow_up_items(raw: Any) -> tuple[FollowUpsBody, list[dict[str, Any]]]:
    """The intake bodies for each id in FollowUpOperationIds (possibly none)."""
    body = validated(FollowUpsBody, raw)
    field = "runtime_result.FollowUpOperationIds"
    found = [v for k, v in body.runtime_result.items() if k.lower() == "followupoperationids"]
    if not found:
        raise invalid(field, "is required")
    if len(found) > 1:
        raise invalid(field, "is given more than once (field names are matched in any case)")
    ids = found[0]
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise invalid(field, "must be a list of job ids")
    if len(ids) > MAX_BATCH:
        raise invalid(field, f"at most {MAX_BATCH} job ids")
    for i, job_id in enumerate(ids):
        if not valid_remote_id(job_id):
            raise invalid(
                f"{field}.{i}", "must be 1-200 characters of [A-Za-z0-9._:-], not dots alone"
            )
    return body, [follow_up(body, job_id) for job_id in dict.fromkeys(ids)]


def follow_up(body: FollowUpsBody, job_id: str) -> dict[str, Any]:
    """The intake body of one follow-up; with a made-up id, the fields that would apply
    to each, to check them when the runtime result returned none."""
    given = body.model_dump(exclude={"runtime_result", "seal"}, exclude_none=True)
    return {"kind": Kind.FUNCTION_JOB.value, "remote_id": job_id, **given}


def _given(body: IntakeBody, names: tuple[str, ...]) -> list[str]:
    return [name for name in names if getattr(body, name) is not None]


def _refuse(body: IntakeBody, names: tuple[str, ...], message: str) -> None:
    """A 422 naming the first of ``names`` the body gives."""
    given = _given(body, names)
    if given:
        raise invalid(given[0], message)


def filter_intake(
    body: IntakeBody, now: float, skew_s: float, declared: FilterNames | None
) -> tuple[str, dict[str, Any]]:
    """(the stored key, the tracking's starting ``remote``), or a 422 naming the field."""
    found_by = f"{body.kind.value} is found by filter: {_NEEDS[body.kind]}"
    _refuse(body, ("remote_id", "enqueue_response"), found_by)
    if body.kind is Kind.TRIGGER_WORK:
        _refuse(body, ("action_id", "job_id"), "not a trigger_work filter (action_work takes it)")
        if body.trigger_binding_id is None:
            raise invalid("trigger_binding_id", "is required for trigger_work")
        if body.entity_id is None and body.filter_correlation_id is None:
            raise invalid("entity_id", "trigger_work needs entity_id or filter_correlation_id")
    else:
        trigger_only = ("trigger_binding_id", "filter_correlation_id")
        _refuse(body, trigger_only, "not an action_work filter (trigger_work takes it)")
        if body.job_id is not None:
            known = "not with job_id: the job is already known"
            _refuse(body, ("action_id", "entity_id", "since", "expect_jobs"), known)
        elif body.action_id is None:
            raise invalid("action_id", "is required for action_work (or give job_id)")
    since = None
    if body.since is not None:
        if body.since.tzinfo is None:
            raise invalid("since", "must carry a time zone (e.g. Z)")
        since = iso(body.since.astimezone(UTC).timestamp())
    if declared is not None:
        for field in _given(body, tuple(SENT_AS)) if body.job_id is None else ():
            wanted = SENT_AS[field]
            if not declared.declared("function_jobs", wanted):
                # What the user asked for is refused: worth an INFO line, unlike
                # the start-up note that the route lacks the filter.
                name = declared.name("function_jobs", wanted)
                log.info(
                    "intake refused: the jobs list route declares no filter for a field",
                    extra={"fields": {"field": field, "filter": name}},
                )
                raise invalid(
                    field,
                    "the workspace's OpenAPI document declares no filter for it "
                    f"({name}) on the jobs list route",
                )
    work = WorkFilter(
        trigger_binding_id=body.trigger_binding_id,
        entity_id=body.entity_id,
        filter_correlation_id=body.filter_correlation_id,
        action_id=body.action_id,
        job_id=body.job_id,
        since=since,
    )
    in_force = body.since.timestamp() if body.since is not None else now - skew_s
    remote: dict[str, Any] = {
        "Filter": work.to_json(),
        "Since": iso(in_force) if body.job_id is None else None,
        "ExpectJobs": body.expect_jobs or 1,
        "Jobs": [],
    }
    return work.key(), remote
