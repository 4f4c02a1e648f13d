"""Generated project builds (Queued -> Running -> Succeeded/Failed/Cancelled), read lazily."""

from __future__ import annotations

import math
import random
from typing import Any

from orchestrator.clock import iso
from orchestrator.simulator.enums import B_CANCELLED, B_FAILED, B_QUEUED, B_RUNNING, B_SUCCEEDED
from orchestrator.simulator.model import View
from orchestrator.simulator.profiles import BuildBehaviour, pick

# ReasonCode -> (Category, Retryable, SqlState, SafeTarget, RemediationCode, localized Summary)
FAILURES: dict[str, tuple[str, bool, str | None, str, str, str]] = {
    "storage_capacity_exhausted": (
        "Storage",
        False,
        "53100",
        "project_artifacts",
        "free_or_expand_storage",
        "Le stockage de l'espace de travail est plein.",
    ),
    "publication_commit_unconfirmed": (
        "Publication",
        True,
        None,
        "project_publication",
        "verify_publication_then_resubmit",
        "La publication n'a pas pu être confirmée ; l'artefact actif précédent est conservé.",
    ),
    "compilation_failed": (
        "Compilation",
        False,
        None,
        "project_sources",
        "fix_compilation_errors",
        "La compilation a échoué.",
    ),
    "check_rule_violation": (
        "Validation",
        False,
        None,
        "project_rules",
        "fix_rule_violations",
        "Une règle de vérification n'est pas respectée.",
    ),
}

_OUTCOME_STATUS = {"succeeded": B_SUCCEEDED, "failed": B_FAILED, "cancelled": B_CANCELLED}


def failure_body(reason_code: str) -> dict[str, Any]:
    category, retryable, sql_state, target, remediation, summary = FAILURES[reason_code]
    return {
        "ReasonCode": reason_code,
        "Category": category,
        "Retryable": retryable,
        "SqlState": sql_state,
        "SafeTarget": target,
        "RemediationCode": remediation,
        "Summary": summary,
    }


def build_body(
    build_id: str,
    status: int,
    kind: int,
    created_at: float,
    started_at: float | None,
    completed_at: float | None,
    modified_at: float,
) -> dict[str, Any]:
    return {
        "Id": build_id,
        "Status": status,
        "Kind": kind,
        "CreatedAt": iso(created_at),
        "StartedAt": iso(started_at),
        "CompletedAt": iso(completed_at),
        "ModifiedAt": iso(modified_at),
        "ArtifactId": None,
        "ErrorSummary": None,
        "Failure": None,
    }


def terminal_fields(project: str, status: int, build_id: str, reason: str) -> dict[str, Any]:
    """ArtifactId on success; diagnostics on failure, as each project type reports them."""
    if status == B_SUCCEEDED:
        return {"ArtifactId": "art-" + build_id.removeprefix("bld-")}
    if status == B_FAILED:
        summary = FAILURES[reason][5]
        if project == "net":
            return {"ErrorSummary": summary, "Failure": failure_body(reason)}
        return {"ErrorSummary": "Workspace UI build failed: " + reason.replace("_", " ")}
    if status == B_CANCELLED:
        return {"ErrorSummary": "The build was cancelled."}
    return {}


class GeneratedBuild:
    def __init__(
        self,
        build_id: str,
        project: str,
        kind: int,
        created_at: float,
        behaviour: BuildBehaviour,
        rng: random.Random,
    ) -> None:
        self.build_id = build_id
        self.project = project
        self.kind = kind
        self.created_at = created_at
        self.start_at = created_at + behaviour.queue_s.draw(rng)
        self.end_at = self.start_at + behaviour.duration_s.draw(rng)
        self.outcome = _OUTCOME_STATUS[pick(rng, behaviour.outcomes)]
        self.reason = pick(rng, behaviour.failure_reasons)
        if project == "ui" and self.reason == "storage_capacity_exhausted":
            self.reason = "compilation_failed"  # UI builds have no storage failure mode
        self.cache: tuple[int, float, bytes] | None = None

    def view(self, now: float) -> View:
        if now < self.start_at:
            status, started, done, modified, until = (
                B_QUEUED,
                None,
                None,
                self.created_at,
                self.start_at,
            )
        elif now < self.end_at:
            status, started, done, modified, until = (
                B_RUNNING,
                self.start_at,
                None,
                self.start_at,
                self.end_at,
            )
        else:
            status, started, done, modified, until = (
                self.outcome,
                self.start_at,
                self.end_at,
                self.end_at,
                math.inf,
            )
        body = build_body(
            self.build_id, status, self.kind, self.created_at, started, done, modified
        )
        body.update(terminal_fields(self.project, status, self.build_id, self.reason))
        return View(body, status, modified, until)
