"""The group resource (``GET /v1/groups/{group}``) and the data of a group's one event."""

from __future__ import annotations

from typing import Any

from orchestrator.clock import iso
from orchestrator.store.groups import LISTED_MEMBERS, Group, GroupEnd, Member

# A member's result summary in a group event: the first of these its result has.
_SUMMARY_KEYS = ("error_summary", "last_error", "result_summary", "reason_code")
SUMMARY_CHARS = 500


def group_resource(g: Group) -> dict[str, Any]:
    return {
        "group": g.name,
        "state": g.state,
        "sealed": g.sealed_at is not None,
        "ended": g.outcome is not None,
        "expect": g.expect,
        "members": {"total": g.members, "active": g.members - g.ended, "terminal": g.ended},
        "outcomes": dict(g.outcomes),
        "created_at": iso(g.created_at),
        "sealed_at": iso(g.sealed_at),
        "deadline_at": iso(g.deadline_at),
        "first_end_at": iso(g.first_end_at),
        "last_end_at": iso(g.last_end_at),
        "ended_at": iso(g.ended_at),
    }


def group_event_data(end: GroupEnd) -> dict[str, Any]:
    """The group resource, with the members the event names: those that did not
    succeed (completed), or those still open (deadline_exceeded), at most
    ``LISTED_MEMBERS``; ``listed_all`` says whether that is all of them."""
    g = end.group
    data = group_resource(g)
    if g.outcome == "deadline_exceeded":
        data["open_members"] = [_open(m) for m in end.listed]
        data["listed_all"] = len(end.listed) == g.members - g.ended
    else:
        data["not_succeeded"] = [_ended(m) for m in end.listed]
        data["listed_all"] = len(end.listed) == g.ended - g.outcomes.get("succeeded", 0)
    data["listed_limit"] = LISTED_MEMBERS
    return data


def _member(m: Member) -> dict[str, Any]:
    return {"tracking_id": m.tracking_id, "workspace": m.workspace, "kind": m.kind,
            "remote_id": m.remote_id}  # fmt: skip


def _ended(m: Member) -> dict[str, Any]:
    return {**_member(m), "outcome": m.outcome, "summary": result_summary(m.result)}


def _open(m: Member) -> dict[str, Any]:
    return {**_member(m), "remote_status": m.remote_status}


def result_summary(result: dict[str, Any] | None) -> str | None:
    """A line of what a result says (an error summary, the last error, a build's
    ReasonCode, a run's result summary), or None."""
    if not result:
        return None
    failure = result.get("failure")
    found: Any = failure.get("reason_code") if isinstance(failure, dict) else None
    for key in _SUMMARY_KEYS:
        value = result.get(key)
        if value:
            found = value
            break
    if found is None:
        return None
    text = found if isinstance(found, str) else str(found)
    return text[:SUMMARY_CHARS]
