"""The tracking resource: the JSON form of a tracking that the API answers with
and that every event carries as ``data``."""

from __future__ import annotations

from typing import Any

from orchestrator.clock import iso
from orchestrator.store.base import Tracking
from orchestrator.vocabulary import TrackingState


def tracking_resource(t: Tracking) -> dict[str, Any]:
    return {
        "tracking_id": t.tracking_id,
        "workspace": t.workspace,
        "kind": t.kind,
        "remote_id": t.remote_id,
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
    }
