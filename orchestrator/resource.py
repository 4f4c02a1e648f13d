"""The tracking resource: the JSON form of a tracking that the API answers with
and that every event carries as ``data``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.clock import iso
from orchestrator.store.base import Tracking
from orchestrator.vocabulary import TrackingState
from orchestrator.workfilter import WorkFilter, is_filter_key


def _found_by_filter(t: Tracking) -> tuple[str | None, dict[str, Any] | None]:
    """(remote_id, filter) of work found by filter: the first matched job, the filter.

    Its stored remote_id is the filter's key (``workfilter.py``), not an id of Moltaro's.
    """
    if not is_filter_key(t.remote_id):
        return t.remote_id, None
    remote = t.remote if isinstance(t.remote, Mapping) else {}
    found = WorkFilter.from_json(remote.get("Filter")) or WorkFilter.from_key(t.remote_id)
    shown = found.to_json() if found is not None else {}
    shown["since"] = remote.get("Since", shown.get("since"))
    shown["expect_jobs"] = remote.get("ExpectJobs", 1)
    jobs = remote.get("Jobs")
    first = jobs[0] if isinstance(jobs, list) and jobs else None
    job_id = first.get("JobId") if isinstance(first, Mapping) else None
    if job_id is None and found is not None:
        job_id = found.job_id  # named by the caller: known before it is read
    return (job_id if isinstance(job_id, str) else None), shown


def tracking_resource(t: Tracking) -> dict[str, Any]:
    remote_id, found = _found_by_filter(t)
    return {
        "tracking_id": t.tracking_id,
        "workspace": t.workspace,
        "kind": t.kind,
        "remote_id": remote_id,
        "filter": found,
        "state": t.state,
        "outcome": t.outcome,
        "remote_status": t.remote_status,
        "remote": t.remote,
        "result": t.result,
        "polls": t.polls,
        "last_polled_at": iso(t.last_polled_at),
        "next_poll_at": iso(t.next_poll_at) if t.state == TrackingState.ACTIVE else None,
        "next_poll_reason": t.next_poll_reason if t.state == TrackingState.ACTIVE else None,
        "last_error": t.last_error,
        "deadline_at": iso(t.deadline_at),
        "deadline_source": t.deadline_source,
        "created_at": iso(t.created_at),
        "terminal_at": iso(t.terminal_at),
        "labels": dict(t.labels),
        "correlation_id": t.correlation_id,
        "callback_url": t.callback_url,
        "notify": t.notify,
        "group": t.group_name,
    }
