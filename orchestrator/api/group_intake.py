"""The group options of intake (``group`` on one, a batch, follow-ups) and the problem
a refusal of a group answers with."""

from __future__ import annotations

import uuid
from typing import Any

from orchestrator.api.models import GROUP_RULE, valid_remote_id
from orchestrator.api.problems import invalid
from orchestrator.errors import ApiProblem, GroupError, GroupSealed


def group_problem(exc: GroupError) -> ApiProblem:
    if isinstance(exc, GroupSealed):
        return ApiProblem(
            409, "Group sealed", f"group {exc.name} is sealed: it takes no new member",
            field="group", extra={"group": exc.name},
        )  # fmt: skip
    return ApiProblem(404, "Not found", "no such group", field="group")


def checked_group(value: Any, field: str = "group") -> str:
    if not isinstance(value, str) or not valid_remote_id(value):
        raise invalid(field, GROUP_RULE)
    return value


def follow_ups_group(raw: Any) -> tuple[str, bool]:
    """A follow-ups call's group and whether it seals it: a group of their own
    (``follow-ups-...``, sealed) unless the body names one (sealed only if it says)."""
    given = raw.get("group") if isinstance(raw, dict) else None
    seal = raw.get("seal") if isinstance(raw, dict) else None
    if given is None:
        return f"follow-ups-{uuid.uuid4().hex[:24]}", seal is not False
    return checked_group(given), seal is True
