"""Intake of work found by filter (``trigger_work``, ``action_work``): CONTRACT section 8.

Which fields each kind takes, the key the tracking is stored under (see
``workfilter.py``), the ``since`` in force, and a 422 for a filter the
workspace's OpenAPI document does not declare on the Function operations jobs
route. The id kinds refuse these fields, naming the first one given.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC
from typing import TYPE_CHECKING, Any

from orchestrator.clock import iso
from orchestrator.errors import ApiProblem
from orchestrator.vocabulary import FILTER_KINDS, Kind
from orchestrator.workfilter import WorkFilter

if TYPE_CHECKING:
    from orchestrator.api.models import IntakeBody
    from orchestrator.interpret.filters import FilterNames

# Intake field -> the filter it is sent as on the jobs route.
SENT_AS = {
    "trigger_binding_id": "trigger_binding_id",
    "entity_id": "entity_id",
    "filter_correlation_id": "search",
    "action_id": "action_id",
    "since": "from",
}
_ONLY_FILTER_KINDS = (*SENT_AS, "job_id", "expect_jobs")
DeclaredNames = Callable[[str], "FilterNames | None"]


def _invalid(field: str, message: str) -> ApiProblem:
    return ApiProblem(422, "Invalid request", f"{field}: {message}", field=field)


def _given(body: IntakeBody, names: tuple[str, ...]) -> list[str]:
    return [name for name in names if getattr(body, name) is not None]


def refuse_filter_fields(body: IntakeBody) -> None:
    """An id kind names its work by remote_id: the filter fields are not for it."""
    given = _given(body, _ONLY_FILTER_KINDS)
    if given:
        kinds = " and ".join(FILTER_KINDS)
        raise _invalid(given[0], f"only {kinds} take it, not {body.kind.value}")


def filter_intake(
    body: IntakeBody, now: float, skew_s: float, declared: FilterNames | None
) -> tuple[str, dict[str, Any]]:
    """(the stored key, the tracking's starting ``remote``), or a 422 naming the field."""
    for name in ("remote_id", "enqueue_response"):
        if getattr(body, name) is not None:
            raise _invalid(name, f"{body.kind.value} is found by filter: {_needs(body.kind)}")
    if body.kind is Kind.TRIGGER_WORK:
        _trigger(body)
    else:
        _action(body)
    since = None
    if body.since is not None:
        if body.since.tzinfo is None:
            raise _invalid("since", "must carry a time zone (e.g. Z)")
        since = iso(body.since.astimezone(UTC).timestamp())
    if declared is not None:
        for field in _given(body, tuple(SENT_AS)) if body.job_id is None else ():
            wanted = SENT_AS[field]
            if not declared.declared("function_jobs", wanted):
                raise _invalid(
                    field,
                    "the workspace's OpenAPI document declares no filter for it "
                    f"({declared.name('function_jobs', wanted)}) on the jobs list route",
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


def _needs(kind: Kind) -> str:
    if kind is Kind.TRIGGER_WORK:
        return "give trigger_binding_id and entity_id or filter_correlation_id"
    return "give action_id (with entity_id for an entity action) or job_id"


def _trigger(body: IntakeBody) -> None:
    for name in ("action_id", "job_id"):
        if getattr(body, name) is not None:
            raise _invalid(name, "not a trigger_work filter (action_work takes it)")
    if body.trigger_binding_id is None:
        raise _invalid("trigger_binding_id", "is required for trigger_work")
    if body.entity_id is None and body.filter_correlation_id is None:
        raise _invalid("entity_id", "trigger_work needs entity_id or filter_correlation_id")


def _action(body: IntakeBody) -> None:
    for name in ("trigger_binding_id", "filter_correlation_id"):
        if getattr(body, name) is not None:
            raise _invalid(name, "not an action_work filter (trigger_work takes it)")
    if body.job_id is not None:
        for name in ("action_id", "entity_id", "since", "expect_jobs"):
            if getattr(body, name) is not None:
                raise _invalid(name, "not with job_id: the job is already known")
        return
    if body.action_id is None:
        raise _invalid("action_id", "is required for action_work (or give job_id)")
