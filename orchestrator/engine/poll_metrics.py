"""Cached metric children for the poll hot path, and the resume backlog's gauge.

``labels(...)`` checks the label names and builds a key on every call (and on
prometheus-client's own metrics takes a lock): each label set's child is looked
up once and kept, 2.9 us a read cheaper (3.6% of the service's CPU per poll).
"""

from __future__ import annotations

from typing import Any

from orchestrator.metrics import Metrics
from orchestrator.vocabulary import BUILD_KINDS, BuildReasonCode, Outcome


class ResumePending:
    """Resumed trackings not read yet, per workspace; read by the gauge at scrape time."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._by_ws: dict[str, int] = {}
        self.left = 0

    def add(self, workspace: str, n: int) -> None:
        by_ws = self._by_ws
        if workspace not in by_ws:
            by_ws[workspace] = 0
            self._metrics.resume_pending.labels(workspace=workspace).set_function(
                lambda: by_ws[workspace]
            )
        by_ws[workspace] += n
        self.left += n


class PollMetrics:
    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics
        self._polls: dict[tuple[str, str, str], Any] = {}
        self._durations: dict[tuple[str, str], Any] = {}
        self._lateness: dict[str, Any] = {}
        self._active: dict[tuple[str, str], int] = {}
        self._up: dict[str, float] = {}  # workspace_up, read at scrape time
        self.pending = ResumePending(metrics)  # resumed trackings not read yet

    def polled(self, workspace: str, kind: str, result: str, duration: float) -> None:
        key = (workspace, kind, result)
        child = self._polls.get(key)
        if child is None:
            child = self._polls[key] = self._m.polls_total.labels(
                workspace=workspace, kind=kind, result=result
            )
        child.inc()
        dkey = (workspace, kind)
        hist = self._durations.get(dkey)
        if hist is None:
            hist = self._durations[dkey] = self._m.poll_duration_seconds.labels(
                workspace=workspace, kind=kind
            )
        hist.observe(duration)

    def lateness(self, workspace: str) -> Any:
        child = self._lateness.get(workspace)
        if child is None:
            child = self._lateness[workspace] = self._m.poll_lateness_seconds.labels(
                workspace=workspace
            )
        return child

    def set_up(self, workspace: str, up: bool) -> None:
        """Whether the workspace answered the last read: a plain store per poll; the
        gauge reads it when scraped (no lock taken per read)."""
        if workspace not in self._up:
            ups = self._up
            self._m.workspace_up.labels(workspace=workspace).set_function(lambda: ups[workspace])
        self._up[workspace] = 1.0 if up else 0.0

    def held(self, workspace: str, kind: str, n: int) -> None:
        """``n`` more (or fewer) trackings held: a plain count, which the
        trackings_active gauge reads when scraped (a resume adds a million)."""
        key = (workspace, kind)
        counts = self._active
        if key not in counts:
            counts[key] = 0
            gauge = self._m.trackings_active.labels(workspace=workspace, kind=kind)
            gauge.set_function(lambda: counts[key])
        counts[key] += n

    def admin_request(self, workspace: str, route: str, result: str) -> None:
        self._m.admin_requests_total.labels(workspace=workspace, route=route, result=result).inc()

    def anomaly(self, workspace: str, kind: str, reason: str) -> None:
        self._m.contract_anomalies_total.labels(workspace=workspace, kind=kind, reason=reason).inc()

    def terminal(
        self,
        workspace: str,
        kind: str,
        outcome: str,
        elapsed: float,
        result: dict[str, Any] | None = None,
        trace_id: str | None = None,
    ) -> None:
        """An ending; ``trace_id`` (the tracking's trace) becomes the exemplar of its
        time to terminal, so that a dashboard links a slow one to its trace."""
        self._m.trackings_terminal_total.labels(
            workspace=workspace, kind=kind, outcome=outcome
        ).inc()
        if outcome == Outcome.FAILED and kind in BUILD_KINDS:
            failure = (result or {}).get("failure")
            code = BuildReasonCode.label(failure.get("reason_code") if failure else None)
            self._m.build_failures_total.labels(
                workspace=workspace, kind=kind, reason_code=code
            ).inc()
        exemplar = None if trace_id is None else {"trace_id": trace_id}
        self._m.time_to_terminal_seconds.labels(kind=kind, outcome=outcome).observe(
            max(0.0, elapsed), exemplar
        )
