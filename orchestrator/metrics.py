"""Every Prometheus metric of the contract (section 5), in a registry of our own.

Nothing is registered at import time: a ``Metrics`` is built by the service
(or a test) around a fresh ``CollectorRegistry``. No id of any kind is ever a
label value; labels are workspace, kind, outcome, result, sink and reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)

from orchestrator.loopmetrics import LoopCounter, LoopHistogram
from orchestrator.vocabulary import (
    BUILD_KINDS,
    BuildReasonCode,
    Kind,
    LeaseLoss,
    Outcome,
    PollResult,
)

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
        self.registry = r = registry if registry is not None else CollectorRegistry()
        # process_* (memory, CPU, open files), python_info and python_gc_*: 0.1 ms of
        # a scrape's 7 ms at the contract's series (measured, prometheus-client 0.26).
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)

        def counter(name: str, doc: str, *labels: str) -> Counter:
            return Counter(f"orchestrator_{name}", doc, labels, registry=r)

        def gauge(name: str, doc: str, *labels: str) -> Gauge:
            return Gauge(f"orchestrator_{name}", doc, labels, registry=r)

        def histogram(name: str, doc: str, buckets: Sequence[float], *labels: str) -> Histogram:
            return Histogram(f"orchestrator_{name}", doc, labels, buckets=buckets, registry=r)

        self.trackings_active = gauge(
            "trackings_active", "Trackings currently being polled.", "workspace", "kind"
        )
        self.trackings_created_total = counter(
            "trackings_created_total",
            "Trackings accepted by intake (new ones only).",
            "workspace",
            "kind",
        )
        self.trace_context_ignored_total = counter(
            "trace_context_ignored_total",
            "W3C trace context values ignored at intake as malformed (header or item field).",
            "field",
        )
        self.trackings_terminal_total = counter(
            "trackings_terminal_total",
            "Trackings that reached a terminal outcome.",
            "workspace",
            "kind",
            "outcome",
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
        self.time_to_terminal_seconds = histogram(
            "time_to_terminal_seconds",
            "From intake to the terminal outcome.",
            TIME_TO_TERMINAL_BUCKETS,
            "kind",
            "outcome",
        )
        self.event_deliveries_total = counter(
            "event_deliveries_total", "Event delivery attempts by result.", "sink", "result"
        )
        self.sink_disabled = gauge(
            "sink_disabled",
            "1 while a sink is disabled (a 410, or no success for events.disable_after_s).",
            "sink",
        )
        self.event_outbox_pending = gauge(
            "event_outbox_pending", "Deliveries waiting in the outbox.", "sink"
        )
        self.event_delivery_latency_seconds = histogram(
            "event_delivery_latency_seconds",
            "From the event's creation (terminal transition) to a 2xx from the sink.",
            DELIVERY_LATENCY_BUCKETS,
            "sink",
        )
        self.build_failures_total = counter(
            "build_failures_total",
            "Builds that ended failed, by their Failure.ReasonCode (bounded; the rest: other).",
            "workspace",
            "kind",
            "reason_code",
        )
        self.workspace_up = gauge(
            "workspace_up",
            "1 when the last status read of the workspace got an HTTP answer that was not 5xx.",
            "workspace",
        )
        self.contract_anomalies_total = counter(
            "contract_anomalies_total",
            "Status bodies that break Moltaro's documented contract (never reported as success).",
            "workspace",
            "kind",
            "reason",
        )
        self.event_loop_lag_seconds = histogram(
            "event_loop_lag_seconds",
            "How late the event loop ran a timer that should have fired on time.",
            LOOP_LAG_BUCKETS,
        )
        self.enum_source = gauge(
            "enum_source_fallback",
            "1 when a workspace's enums come from the documented fallback, not its OpenAPI.",
            "workspace",
            "kind",
        )
        self.filter_names_fallback = gauge(
            "filter_names_fallback",
            "1 when a Function operations list route's filter names are the documented "
            "fallback, not read from the workspace's OpenAPI.",
            "workspace",
            "route",
        )
        self.write_backlog = gauge(
            "write_backlog",
            "Poll results, read-backs and terminal writes the engine has sent to the store"
            " and the store has not taken yet.",
        )
        self.resume_pending = gauge(
            "resume_pending",
            "Trackings resumed at start-up that have not been read yet by this process.",
            "workspace",
        )
        self.admin_requests_total = counter(
            "admin_requests_total",
            "Requests to Moltaro's administrative routes that are not status polls "
            "(run history, retry-chain control), by route and result.",
            "workspace",
            "route",
            "result",
        )
        self.in_flight = gauge("polls_in_flight", "Status reads currently in flight.", "workspace")
        self.groups_open = gauge(
            "groups_open",
            "Groups of trackings not ended yet (open or sealed), as the store "
            "counted them at the last check (every 15 s).",
        )
        self.group_duration_seconds = histogram(
            "group_duration_seconds",
            "From a group's creation to its end (its event), by how it ended; counted by the "
            "replica that decided the end.",
            (1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 86400, 7 * 86400),
            "outcome",
        )
        self.group_members = histogram(
            "group_members",
            "Members of each group at its end, by how it ended.",
            (1, 2, 5, 10, 50, 100, 500, 1000, 5000, 10_000, 100_000),
            "outcome",
        )
        self.api_waits = gauge(
            "api_waits", "Server-side waits (?wait=S) currently held open by callers."
        )
        self.ready = gauge("ready", "1 when the service is ready (store writable, not draining).")
        self.memory_limit_bytes = gauge(
            "memory_limit_bytes",
            "The memory limit of the process's cgroup (its container's limit); 0: none found.",
        )
        self.resume_loaded = gauge(
            "resume_loaded", "Active trackings loaded from the store since start-up."
        )
        self.resume_expected = gauge(
            "resume_expected", "Active trackings the start-up load counted to load."
        )
        # Several replicas on one PostgreSQL store (contract section 9).
        self.replica_leases = gauge(
            "replica_leases", "Trackings this replica holds under a lease.", "workspace"
        )
        self.replica_peers = gauge(
            "replica_peers", "Live replicas sharing the store, this one included."
        )
        self.store_listener_up = gauge(
            "store_listener_up", "1 while the LISTEN connection to the store is up."
        )
        self.lease_takeovers_total = counter(
            "lease_takeovers_total", "Trackings claimed after another replica's lease ran out."
        )
        self.leases_lost_total = counter(
            "leases_lost_total",
            "Leases a renewal found no longer this replica's, by reason: finished and "
            "ended_elsewhere are churn (the tracking ended); taken and expired mean work "
            "this replica held went to others.",
            "reason",
        )
        self.lease_handovers_total = counter(
            "lease_handovers_total",
            "Trackings this replica handed back to its peers, holding more than its share.",
        )
        self.store_up = gauge(
            "store_up", "1 while the shared store answers this replica's lease renewals."
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
        for reason in LeaseLoss:
            self.leases_lost_total.labels(reason=reason)
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
