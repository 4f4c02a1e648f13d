"""Which row of the platform's execution-model decision table a function key is in.

A pure join, by BusinessFunctionId, of the Function Catalog, the binding
summaries, the API publications and the schedules (all as read from the
workspace), with the enums from its OpenAPI document. The catalog after a
successful Build is the runtime truth: the row follows its
CurrentPublishedContract, and whatever disagrees with it (a publication kind, a
binding, a schedule) is reported as a contradiction rather than trusted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orchestrator.interpret._read import as_timestamp, enum_name, get_ci, text
from orchestrator.interpret.enums import (
    BINDING_SOURCE,
    CONTRACT,
    PUBLICATION_KIND,
    PlatformEnum,
)
from orchestrator.vocabulary import Kind

Row = Mapping[str, Any]

FUNCTION_KEY_RULE = "must be 1-200 characters of [A-Za-z0-9._:-], not dots alone"
_FUNCTION_KEY = re.compile(r"[A-Za-z0-9._:-]{1,200}")


def valid_function_key(key: str) -> bool:
    """A function key the service asks about (checked before any request is made)."""
    return bool(_FUNCTION_KEY.fullmatch(key)) and key.strip(".") != ""


REQUEST_BLOCKING = "request_blocking"
QUEUED = "queued"
VALIDATED_THEN_QUEUED = "validated_then_queued"

# surface -> (execution model, what the caller sees while it runs, completion evidence)
SURFACES: dict[str, tuple[str, str, str]] = {
    "entity_save": (
        REQUEST_BLOCKING,
        "Request-blocking inside the record save",
        "The original record API response",
    ),
    "command": (
        REQUEST_BLOCKING,
        "Request-blocking",
        "The command response contains the terminal run result",
    ),
    "http_endpoint": (
        REQUEST_BLOCKING,
        "Request-blocking for that inbound HTTP request",
        "The endpoint's HTTP response; any job it explicitly enqueues is separate work",
    ),
    "global_job_api": (
        QUEUED,
        "Queued worker execution",
        "Poll the returned JobId (GET /api/workspace/functions/jobs/{jobId})",
    ),
    "function_schedule": (
        QUEUED,
        "Each due CRON occurrence is enqueued for a worker unless the target already has "
        "queued or running work; an overlap is recorded as Skipped",
        "Query jobs and runs by ScheduleId",
    ),
    "entity_trigger": (
        QUEUED,
        "The record commits first, then a worker handles the trigger",
        "Query jobs and runs by TriggerBindingId or correlation id",
    ),
    "action": (
        VALIDATED_THEN_QUEUED,
        "Validation is request-blocking; execution is queued",
        "Observe the active action job and Function operations",
    ),
    "job_unpublished": (
        QUEUED,
        "Queued worker execution, reachable only through schedules or other queued work",
        "Query jobs and runs by FunctionId in Function operations",
    ),
}

# Which tracking kind of ours follows each queued surface, and with which intake fields.
TRACKING: dict[str, tuple[str, list[str]]] = {
    "global_job_api": (Kind.FUNCTION_JOB, ["remote_id"]),
    "function_schedule": (Kind.SCHEDULE, ["remote_id"]),
    "entity_trigger": (
        Kind.TRIGGER_WORK,
        ["trigger_binding_id", "entity_id", "filter_correlation_id"],
    ),
    "action": (Kind.ACTION_WORK, ["action_id", "entity_id", "job_id"]),
}
# What the answer repeats of its first (primary) row.
_PRIMARY = ("surface", "execution_model", "request_blocking", "completion_evidence")
_SAVE_CONTRACTS = ("Validation", "BeforeSaveMutation")
# The surface a contract runs on (a Job's depends on its publication and schedules).
_CONTRACT_SURFACE = {
    "Validation": "entity_save",
    "BeforeSaveMutation": "entity_save",
    "Command": "command",
    "HttpEndpoint": "http_endpoint",
    "Action": "action",
    "TriggerHandler": "entity_trigger",
}


@dataclass(frozen=True, slots=True)
class CatalogSnapshot:
    """What the workspace answered, rows as received (any casing, enums as ints or names)."""

    functions: Sequence[Row]
    bindings: Sequence[Row]
    publications: Sequence[Row]
    schedules: Sequence[Row]
    enums: Mapping[str, PlatformEnum]


def explain(function_key: str, snapshot: CatalogSnapshot) -> dict[str, Any] | None:
    """The execution model of ``function_key``; None when the catalog does not list it.

    The catalog row is found by the key's exact spelling first, then case-insensitively.
    """
    for exact in (True, False):
        for row in snapshot.functions:
            key = text(row, "FunctionKey")
            if key is not None and (
                key == function_key if exact else key.lower() == function_key.lower()
            ):
                return _Explainer(row, snapshot).answer()
    return None


class _Explainer:
    def __init__(self, fn: Row, snapshot: CatalogSnapshot) -> None:
        self.fn = fn
        self.snapshot = snapshot
        self.enums = snapshot.enums
        self.function_id = text(fn, "BusinessFunctionId")
        self.flags: list[dict[str, Any]] = []

    def mine(self, rows: Sequence[Row]) -> list[Row]:
        """The rows of this function (by BusinessFunctionId)."""
        fid = self.function_id
        return [r for r in rows if fid is not None and text(r, "BusinessFunctionId") == fid]

    def flag(self, code: str, detail: str, **extra: Any) -> None:
        self.flags.append({"code": code, "detail": detail, **extra})

    def name_of(self, enum: str, raw: Any, what: str) -> str | None:
        if raw is None:
            return None
        name = enum_name(raw, self.enums[enum].values)
        if name is None:
            self.flag(
                "unknown_enum_value",
                f"{what} {raw!r} is not a value of {enum} in the {self.enums[enum].source} enum",
                enum=enum,
                value=raw,
            )
        return name

    def answer(self) -> dict[str, Any]:
        fn = self.fn
        contract = self.name_of(
            CONTRACT, get_ci(fn, "CurrentPublishedContract"), "CurrentPublishedContract"
        )
        scope = text(fn, "Scope")
        publication = self._publication(contract)
        bindings = self._bindings(contract)
        schedules = self._schedules(contract, scope)
        surfaces = self._surfaces(contract, publication, bindings, schedules)
        if contract is None and get_ci(fn, "CurrentPublishedContract") is None:
            self.flag(
                "no_published_contract",
                "the catalog has no CurrentPublishedContract: nothing of this function runs",
            )
        rows = [_row(s) for s in surfaces]
        primary = rows[0] if rows else {}
        callable_ = bool(publication and publication["callable"])
        return {
            "function_key": text(fn, "FunctionKey"),
            "business_function_id": self.function_id,
            "name": text(fn, "Name"),
            "scope": scope,
            "contract": contract,
            "revision": get_ci(fn, "Revision"),
            **{k: primary.get(k) for k in _PRIMARY},
            "rows": rows,
            "callable": callable_,
            "publication": publication,
            "bindings": bindings,
            "schedules": schedules,
            "contradictions": self.flags,
            "enums": {name: e.to_json() for name, e in self.enums.items()},
            "enum_fallback": any(e.source == "fallback" for e in self.enums.values()),
        }

    def _publication(self, contract: str | None) -> dict[str, Any] | None:
        rows = self.mine(self.snapshot.publications)
        if not rows:
            return None
        p = rows[0]
        kind = self.name_of(PUBLICATION_KIND, get_ci(p, "Kind"), "API publication Kind")
        enabled = get_ci(p, "IsEnabled") is True
        retired = get_ci(p, "IsRetired") is True
        key = text(p, "FunctionKey")
        if retired:
            self.flag("key_retired", f"the published key {key} is retired: not callable")
        if not enabled:
            self.flag("key_disabled", f"the published key {key} is disabled: not callable")
        if kind == "Enqueue" and contract is not None and contract != "Job":
            self.flag(
                "enqueue_publication_on_non_job_contract",
                f"an Enqueue publication on a {contract} contract: the catalog contract is the "
                "runtime truth; do not expect a queued job",
            )
        if kind == "Command" and contract is not None and contract != "Command":
            self.flag(
                "command_publication_on_non_command_contract",
                f"a Command publication on a {contract} contract",
            )
        if len(rows) > 1:
            self.flag("several_publications", f"{len(rows)} API publications for one function")
        return {
            "function_key": key,
            "kind": kind,
            "is_enabled": enabled,
            "is_retired": retired,
            "timeout_seconds": get_ci(p, "TimeoutSeconds"),
            "callable": enabled and not retired,
        }

    def _bindings(self, contract: str | None) -> list[dict[str, Any]]:
        out = []
        for b in self.mine(self.snapshot.bindings):
            source = self.name_of(BINDING_SOURCE, get_ci(b, "Source"), "binding Source")
            out.append(
                {
                    "binding_id": text(b, "BindingId"),
                    "source": source,
                    "entity_name": text(b, "EntityName"),
                }
            )
            if source == "EntitySave" and contract is not None and contract not in _SAVE_CONTRACTS:
                self.flag(
                    "entity_save_binding_on_non_save_contract",
                    f"an EntitySave binding on a {contract} contract",
                    binding_id=text(b, "BindingId"),
                )
        sources = {b["source"] for b in out}
        if contract in _SAVE_CONTRACTS and "EntitySave" not in sources:
            self.flag(
                "save_contract_without_entity_save_binding",
                f"a {contract} contract with no EntitySave binding: no record save runs it",
            )
        if contract == "TriggerHandler" and "EntityTrigger" not in sources:
            self.flag(
                "trigger_handler_without_trigger_binding",
                "a TriggerHandler contract with no EntityTrigger binding: no commit triggers it",
            )
        return out

    def _schedules(self, contract: str | None, scope: str | None) -> list[dict[str, Any]]:
        out = []
        for s in self.mine(self.snapshot.schedules):
            sid = text(s, "ScheduleId")
            health = text(s, "TargetHealth")
            status = text(s, "Status")
            next_run = text(s, "NextRunAt")
            out.append(
                {
                    "schedule_id": sid,
                    "cron": text(s, "Cron"),
                    "time_zone": text(s, "TimeZone"),
                    "status": status,
                    "next_run_at": next_run,
                    "last_status": text(s, "LastStatus"),
                    "target_health": health,
                    "active_job_id": text(s, "ActiveJobId"),
                }
            )
            if contract != "Job" or (scope or "").lower() != "global":
                self.flag(
                    "schedule_target_not_global_job",
                    f"schedule {sid} targets a {scope or '?'} {contract or '?'} function; a "
                    "schedule's target must be a published global Job function",
                    schedule_id=sid,
                )
            if health is not None and health.lower() != "healthy":
                self.flag(
                    "schedule_target_unhealthy",
                    f"schedule {sid} reports TargetHealth {health}",
                    schedule_id=sid,
                )
            if (status or "").lower() == "enabled" and as_timestamp(next_run) is None:
                self.flag(
                    "enabled_schedule_without_next_run",
                    f"schedule {sid} is enabled but plans no NextRunAt",
                    schedule_id=sid,
                )
        return out

    def _surfaces(
        self,
        contract: str | None,
        publication: dict[str, Any] | None,
        bindings: list[dict[str, Any]],
        schedules: list[dict[str, Any]],
    ) -> list[str]:
        surfaces: list[str] = []
        kind = publication["kind"] if publication else None
        if contract in _CONTRACT_SURFACE:
            surfaces.append(_CONTRACT_SURFACE[contract])
        elif contract == "Job" and kind == "Enqueue":
            surfaces.append("global_job_api")
        elif contract == "Job" and not schedules:
            surfaces.append("job_unpublished")
        if contract == "Job" and schedules:
            surfaces.append("function_schedule")
        triggered = any(b["source"] == "EntityTrigger" for b in bindings)
        if triggered and "entity_trigger" not in surfaces:
            surfaces.append("entity_trigger")
        return surfaces


def _row(surface: str) -> dict[str, Any]:
    model, description, evidence = SURFACES[surface]
    kind, fields = TRACKING.get(surface, (None, []))
    return {
        "surface": surface,
        "execution_model": model,
        "request_blocking": model == REQUEST_BLOCKING,
        "description": description,
        "completion_evidence": evidence,
        "tracking_kind": kind,
        "tracking_fields": fields,
    }
