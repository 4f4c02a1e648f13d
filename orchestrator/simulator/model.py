"""What every simulated resource shares: its metadata, a view at an instant, a cache."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

from orchestrator.clock import iso
from orchestrator.simulator.enums import SRC_ACTION, SRC_TRIGGER

STOP_REASON = "job.retry.stopRequested"


@dataclass(slots=True)
class View:
    """A resource as it is at one instant: the PascalCase body with integer enums.

    ``valid_until`` is the next instant at which the body changes by itself, so
    the serialized bytes can be cached until then.
    """

    body: dict[str, Any]
    status: int
    modified_at: float
    valid_until: float = math.inf
    can_cancel: bool = False


@dataclass(slots=True)
class JobMeta:
    job_id: str
    function_key: str
    business_function_id: str
    created_at: float
    source: int = 0
    schedule_id: str | None = None
    trigger_binding_id: str | None = None
    correlation_id: str | None = None
    dedup_key: str | None = None
    timeout_seconds: int | None = None
    max_attempts: int = 1
    retry_delay_s: float = 0.0
    action_id: str | None = None
    entity_id: str | None = None  # the record a trigger or an entity action ran for

    @property
    def runtime_visible(self) -> bool:
        """The runtime job route serves API-enqueued work; trigger and action jobs are
        seen through Function operations only."""
        return self.source not in (SRC_TRIGGER, SRC_ACTION)

    def base_body(self) -> dict[str, Any]:
        status_url = (
            f"/api/workspace/functions/jobs/{self.job_id}"
            if self.runtime_visible
            else f"/api/workspace/admin/function-operations/jobs/{self.job_id}"
        )
        return {
            "JobId": self.job_id,
            "FunctionKey": self.function_key,
            "BusinessFunctionId": self.business_function_id,
            "Source": self.source,
            "ScheduleId": self.schedule_id,
            "TriggerBindingId": self.trigger_binding_id,
            "ActionId": self.action_id,
            "EntityId": self.entity_id,
            "CorrelationId": self.correlation_id,
            "DeduplicationKey": self.dedup_key,
            "TimeoutSeconds": self.timeout_seconds,
            "EffectiveMaxAttempts": self.max_attempts,
            "RetryDelaySeconds": self.retry_delay_s,
            "CreatedAt": iso(self.created_at),
            "StatusUrl": status_url,
        }

    def run_extras(self) -> dict[str, Any]:
        """What an admin run row adds to the run body."""
        return {
            "BusinessFunctionId": self.business_function_id,
            "Source": self.source,
            "ScheduleId": self.schedule_id,
            "TriggerBindingId": self.trigger_binding_id,
            "ActionId": self.action_id,
            "EntityId": self.entity_id,
        }


@dataclass(slots=True)
class StopResult:
    status: int  # 200 or 409
    view: View
    detail: str = ""


class Job(Protocol):
    meta: JobMeta
    cache: tuple[int, float, bytes] | None

    def view(self, now: float) -> View | None:
        """The status model at ``now``; None while the id answers 404."""

    def cancel(self, now: float) -> tuple[bool, View]:
        """Cancel if the current state allows it; (accepted, view after)."""

    def stop_retries(self, now: float, expected_modified_at: float) -> StopResult:
        """The administrative stop of the retry chain."""

    def runs(self, now: float) -> list[dict[str, Any]]:
        """Every run started by ``now``, oldest first, as admin run rows."""

    def run_starts(self) -> list[float] | None:
        """Each instant a run of this job may start at, within 1 ms of the StartedAt it shows.

        Read once, when the job is added: commands only ever drop runs. None when
        a start cannot be read as a time.
        """


class Build(Protocol):
    build_id: str
    project: str  # "net" | "ui"
    created_at: float
    cache: tuple[int, float, bytes] | None

    def view(self, now: float) -> View | None:
        """The build record at ``now``; None while the id answers 404."""


def same_instant(a: float, b: float) -> bool:
    """Timestamps compared as the wire shows them: to the millisecond."""
    return iso(a) == iso(b)
