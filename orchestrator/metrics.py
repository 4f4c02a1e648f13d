"""Every Prometheus metric of the contract (section 5), in a registry of our own.

Nothing is registered at import time: a ``Metrics`` is built by the service
(or a test) around a fresh ``CollectorRegistry``. No id of any kind is ever a
label value; labels are workspace, kind, outcome, result, sink and reason.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from orchestrator.loopmetrics import LoopCounter, LoopHistogram
from orchestrator.vocabulary import BUILD_KINDS, BuildReasonCode, Kind, Outcome, PollResult

DELIVERY_RESULTS = ("delivered", "retry", "dead")

# Poll latency against a local workspace is milliseconds; against a remote one,
# tens to hundreds of milliseconds: dense below 0.1 s, sparse up to the timeout.
POLL_DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
# Lateness SLO is 0.5 s (p99): boundaries on both sides of it.
LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
TIME_TO_TERMINAL_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
DELIVERY_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600)
LOOP_LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.trackings_active = Gauge(
            "orchestrator_trackings_active",
            "Trackings currently being polled.",
            ["workspace", "kind"],
            registry=r,
        )
        self.trackings_created_total = Counter(
            "orchestrator_trackings_created_total",
            "Trackings accepted by intake (new ones only).",
            ["workspace", "kind"],
            registry=r,
        )
        self.trace_context_ignored_total = Counter(
            "orchestrator_trace_context_ignored_total",
            "W3C trace context values ignored at intake as malformed (header or item field).",
            ["field"],
            registry=r,
        )
        self.trackings_terminal_total = Counter(
            "orchestrator_trackings_terminal_total",
            "Trackings that reached a terminal outcome.",
            ["workspace", "kind", "outcome"],
            registry=r,
        )
        # Updated once or twice per read: lock-free versions, 2.2 us a read cheaper (loopmetrics).
        self.polls_total = LoopCounter(
            "orchestrator_polls_total",
            "Status reads sent to Moltaro, by result.",
            ["workspace", "kind", "result"],
            registry=r,
        )
        self.poll_duration_seconds = LoopHistogram(
            "orchestrator_poll_duration_seconds",
            "Time from sending a status read to having its body.",
            ["workspace", "kind"],
            buckets=POLL_DURATION_BUCKETS,
            registry=r,
        )
        self.poll_lateness_seconds = LoopHistogram(
            "orchestrator_poll_lateness_seconds",
            "How long after its due time a poll was sent.",
            ["workspace"],
            buckets=LATENESS_BUCKETS,
            registry=r,
        )
        self.time_to_terminal_seconds = Histogram(
            "orchestrator_time_to_terminal_seconds",
            "From intake to the terminal outcome.",
            ["kind", "outcome"],
            buckets=TIME_TO_TERMINAL_BUCKETS,
            registry=r,
        )
        self.event_deliveries_total = Counter(
            "orchestrator_event_deliveries_total",
            "Event delivery attempts by result.",
            ["sink", "result"],
            registry=r,
        )
        self.sink_disabled = Gauge(
            "orchestrator_sink_disabled",
            "1 while a sink is disabled (a 410, or no success for events.disable_after_s).",
            ["sink"],
            registry=r,
        )
        self.event_outbox_pending = Gauge(
            "orchestrator_event_outbox_pending",
            "Deliveries waiting in the outbox.",
            ["sink"],
            registry=r,
        )
        self.event_delivery_latency_seconds = Histogram(
            "orchestrator_event_delivery_latency_seconds",
            "From the event's creation (terminal transition) to a 2xx from the sink.",
            ["sink"],
            buckets=DELIVERY_LATENCY_BUCKETS,
            registry=r,
        )
        self.build_failures_total = Counter(
            "orchestrator_build_failures_total",
            "Builds that ended failed, by their Failure.ReasonCode (bounded; the rest: other).",
            ["workspace", "kind", "reason_code"],
            registry=r,
        )
        self.workspace_up = Gauge(
            "orchestrator_workspace_up",
            "1 when the last status read of the workspace got an HTTP answer that was not 5xx.",
            ["workspace"],
            registry=r,
        )
        self.contract_anomalies_total = Counter(
            "orchestrator_contract_anomalies_total",
            "Status bodies that break Moltaro's documented contract (never reported as success).",
            ["workspace", "kind", "reason"],
            registry=r,
        )
        self.event_loop_lag_seconds = Histogram(
            "orchestrator_event_loop_lag_seconds",
            "How late the event loop ran a timer that should have fired on time.",
            buckets=LOOP_LAG_BUCKETS,
            registry=r,
        )
        self.enum_source = Gauge(
            "orchestrator_enum_source_fallback",
            "1 when a workspace's enums come from the documented fallback, not its OpenAPI.",
            ["workspace", "kind"],
            registry=r,
        )
        self.filter_names_fallback = Gauge(
            "orchestrator_filter_names_fallback",
            "1 when a Function operations list route's filter names are the documented "
            "fallback, not read from the workspace's OpenAPI.",
            ["workspace", "route"],
            registry=r,
        )
        self.write_backlog = Gauge(
            "orchestrator_write_backlog",
            "Poll results, read-backs and terminal writes the engine has sent to the store"
            " and the store has not taken yet.",
            registry=r,
        )
        self.resume_pending = Gauge(
            "orchestrator_resume_pending",
            "Trackings resumed at start-up that have not been read yet by this process.",
            ["workspace"],
            registry=r,
        )
        self.admin_requests_total = Counter(
            "orchestrator_admin_requests_total",
            "Requests to Moltaro's administrative routes that are not status polls "
            "(run history, retry-chain control), by route and result.",
            ["workspace", "route", "result"],
            registry=r,
        )
        self.in_flight = Gauge(
            "orchestrator_polls_in_flight",
            "Status reads currently in flight.",
            ["workspace"],
            registry=r,
        )
        self.ready = Gauge(
            "orchestrator_ready",
            "1 when the service is ready (store writable, not draining).",
            registry=r,
        )
        # Several replicas on one PostgreSQL store (contract section 9).
        self.replica_leases = Gauge(
            "orchestrator_replica_leases",
            "Trackings this replica holds under a lease.",
            ["workspace"],
            registry=r,
        )
        self.replica_peers = Gauge(
            "orchestrator_replica_peers",
            "Live replicas sharing the store, this one included.",
            registry=r,
        )
        self.store_listener_up = Gauge(
            "orchestrator_store_listener_up",
            "1 while the LISTEN connection to the store is up.",
            registry=r,
        )
        self.lease_takeovers_total = Counter(
            "orchestrator_lease_takeovers_total",
            "Trackings claimed after another replica's lease ran out.",
            registry=r,
        )
        self.lease_handovers_total = Counter(
            "orchestrator_lease_handovers_total",
            "Trackings this replica handed back to its peers, holding more than its share.",
            registry=r,
        )
        self.store_up = Gauge(
            "orchestrator_store_up",
            "1 while the shared store answers this replica's lease renewals.",
            registry=r,
        )

    def preinitialise(self, workspaces: Iterable[str], sinks: Iterable[str]) -> None:
        """Create every series whose label set is known, so rates start at 0."""
        for ws in workspaces:
            # workspace_up is not pre-set: 0 before the first read would read as "down".
            self.poll_lateness_seconds.labels(workspace=ws)
            self.in_flight.labels(workspace=ws)
            self.resume_pending.labels(workspace=ws)
            self.replica_leases.labels(workspace=ws)
            for kind in Kind:
                self.trackings_active.labels(workspace=ws, kind=kind)
                self.trackings_created_total.labels(workspace=ws, kind=kind)
                self.poll_duration_seconds.labels(workspace=ws, kind=kind)
                self.enum_source.labels(workspace=ws, kind=kind)
                for poll_result in PollResult:
                    self.polls_total.labels(workspace=ws, kind=kind, result=poll_result)
                for outcome in Outcome:
                    self.trackings_terminal_total.labels(workspace=ws, kind=kind, outcome=outcome)
            for kind in BUILD_KINDS:
                for code in BuildReasonCode:
                    self.build_failures_total.labels(workspace=ws, kind=kind, reason_code=code)
        for kind in Kind:
            for outcome in Outcome:
                self.time_to_terminal_seconds.labels(kind=kind, outcome=outcome)
        for sink in sinks:
            self.event_outbox_pending.labels(sink=sink)
            if sink != "callback":
                self.sink_disabled.labels(sink=sink).set(0)
            self.event_delivery_latency_seconds.labels(sink=sink)
            for result in DELIVERY_RESULTS:
                self.event_deliveries_total.labels(sink=sink, result=result)
