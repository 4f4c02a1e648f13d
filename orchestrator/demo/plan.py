"""The demo's mix of work: what to create on the simulator and what each should end as.

About two thirds is ordinary work created through the simulator's real enqueue
and build routes, whose outcome the simulator's profile draws (successes,
failures, retries after ``NextRunAt``, remote cancellations). The rest follows
scripted timelines (``/_sim/script``), one scenario per platform rule worth
seeing, each with the outcome it must end in.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from orchestrator.client import intake_body
from orchestrator.vocabulary import Kind, Outcome

# Enqueue-able keys only: totals.recalculate (a Command contract) is refused.
JOB_KEYS = ("billing.sync-invoices", "reports.nightly-export", "ledger.reconcile")
BUILD_ROUTES: dict[str, str] = {
    Kind.NET_OPERATION_BUILD: "/api/workspace/admin/net-operation-project/builds",
    Kind.WORKSPACE_UI_BUILD: "/api/workspace/admin/ui-project/builds",
}
# The simulator's profile for the ordinary work: short, with a realistic mix.
PROFILE = {
    "name": "fast",
    "job": {
        "pickup_s": [0.1, 1.0],
        "duration_s": [0.3, 3.0],
        "outcomes": {"success": 0.78, "skipped": 0.04, "failed": 0.12, "timed_out": 0.06},
        "max_attempts": 2,
        "retry_delay_s": 1.0,
    },
    "build": {
        "queue_s": [0.2, 1.5],
        "duration_s": [0.5, 3.5],
        "outcomes": {"succeeded": 0.8, "failed": 0.14, "cancelled": 0.06},
    },
}
# Transport trouble on the status routes; none of it may end a tracking.
FAULTS: list[dict[str, Any]] = [
    {"route": "job_status", "fault": "http_5xx", "ratio": 0.03, "status": 502},
    {"route": "build_status", "fault": "http_5xx", "ratio": 0.03, "status": 500},
    {"route": "job_status", "fault": "reset", "ratio": 0.01},
    {"route": "build_status", "fault": "malformed", "ratio": 0.01},
    {"route": "*", "fault": "latency", "ratio": 0.05, "latency_s": 0.3},
    # One 429 and one 503 with Retry-After: the workspace's polling pauses.
    {"route": "job_status", "fault": "rate_limited", "retry_after_s": 1, "max_hits": 1,
     "start_s": 1.0},
    {"route": "build_status", "fault": "unavailable", "retry_after_s": 1, "max_hits": 1,
     "retry_after_format": "http_date", "start_s": 2.0},
]  # fmt: skip
FOREVER = 3600.0


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    kind: Kind
    steps: list[dict[str, Any]]
    expected: Outcome
    timeout_s: float = 60.0
    cancel: bool = False  # the demo asks the orchestrator to cancel it
    faults: tuple[dict[str, Any], ...] = ()  # rules for this id only


def _job(*steps: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"after_s": 0, "status": "Queued"}, *steps]


SCENARIOS = (
    Scenario(
        "retry-after-NextRunAt",
        Kind.FUNCTION_JOB,
        _job(
            {"after_s": 0.3, "status": "Leased"},
            {"after_s": 1.0, "status": "Queued", "next_run_at_in_s": 1.5,
             "fields": {"WillRetry": True}, "last_error": "lock timeout",
             "run": {"Status": "Failed", "ErrorSummary": "lock timeout"}},
            {"after_s": 2.6, "status": "Leased"},
            {"after_s": 3.2, "status": "Completed",
             "run": {"Status": "Success", "ResultSummary": "412 invoices synced"}},
        ),
        Outcome.SUCCEEDED,
    ),
    Scenario(
        "storage-full",
        Kind.NET_OPERATION_BUILD,
        _job({"after_s": 0.4, "status": "Running"},
             {"after_s": 1.5, "status": "Failed", "failure": "storage_capacity_exhausted"}),
        Outcome.FAILED,
    ),
    Scenario(
        "publication-unconfirmed",
        Kind.NET_OPERATION_BUILD,
        _job({"after_s": 0.3, "status": "Running"},
             {"after_s": 2.0, "status": "Failed", "failure": "publication_commit_unconfirmed"}),
        Outcome.FAILED,
    ),
    Scenario(
        "ui-build-failed",
        Kind.WORKSPACE_UI_BUILD,
        _job({"after_s": 0.2, "status": "Running"},
             {"after_s": 1.2, "status": "Failed", "last_error": "bundle: missing asset"}),
        Outcome.FAILED,
    ),
    Scenario(
        "job-failed",
        Kind.FUNCTION_JOB,
        _job({"after_s": 0.2, "status": "Leased"},
             {"after_s": 1.0, "status": "Failed", "last_error": "upstream refused",
              "run": {"Status": "Failed", "ErrorSummary": "HTTP 403 from the ledger"}}),
        Outcome.FAILED,
    ),
    Scenario(
        "cancelled-by-caller",
        Kind.FUNCTION_JOB,
        _job({"after_s": 25, "status": "Leased"}, {"after_s": 26, "status": "Completed"}),
        Outcome.CANCELLED,
        cancel=True,
    ),
    Scenario(
        "cancelled-remotely",
        Kind.NET_OPERATION_BUILD,
        _job({"after_s": 0.3, "status": "Running"}, {"after_s": 1.2, "status": "Cancelled"}),
        Outcome.CANCELLED,
    ),
    Scenario(
        "job-past-deadline",
        Kind.FUNCTION_JOB,
        _job({"after_s": 0.3, "status": "Leased"}, {"after_s": FOREVER, "status": "Completed"}),
        Outcome.DEADLINE_EXCEEDED,
        timeout_s=3.0,
    ),
    Scenario(
        "build-past-deadline",
        Kind.WORKSPACE_UI_BUILD,
        _job({"after_s": 0.3, "status": "Running"}, {"after_s": FOREVER, "status": "Succeeded"}),
        Outcome.DEADLINE_EXCEEDED,
        timeout_s=2.5,
    ),
    Scenario(
        "vanished-404",
        Kind.FUNCTION_JOB,
        [{"after_s": 0, "not_found": True}],
        Outcome.NOT_FOUND,
    ),
    Scenario(
        "flaky-transport",
        Kind.FUNCTION_JOB,
        _job({"after_s": 0.3, "status": "Leased"}, {"after_s": 2.0, "status": "Completed"}),
        Outcome.SUCCEEDED,
        faults=(
            {"route": "job_status", "fault": "http_5xx", "status": 503, "max_hits": 2},
            {"route": "job_status", "fault": "reset", "max_hits": 1},
            {"route": "job_status", "fault": "malformed", "max_hits": 1},
        ),
    ),
    Scenario(
        "completed-without-evidence",
        Kind.FUNCTION_JOB,
        _job({"after_s": 0.2, "status": "Leased"},
             {"after_s": 0.8, "status": "Completed", "run": {"ResultSummary": ""}},
             {"after_s": 2.0, "status": "Completed", "run": {"ResultSummary": "4 rows"}}),
        Outcome.SUCCEEDED,
    ),
    Scenario(
        "build-succeeded",
        Kind.WORKSPACE_UI_BUILD,
        _job({"after_s": 0.5, "status": "Running"}, {"after_s": 1.8, "status": "Succeeded"}),
        Outcome.SUCCEEDED,
    ),
)  # fmt: skip


@dataclass(slots=True)
class Planned:
    """One piece of work: its intake body and, when scripted, what it must end as."""

    scenario: str
    kind: str
    intake: dict[str, Any]
    expected: str | None = None
    cancel: bool = False
    remote_id: str = ""


@dataclass(slots=True)
class Plan:
    items: list[Planned] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)


def choose(count: int, rng: random.Random) -> list[tuple[str, Scenario | None]]:
    """What to create: ("enqueue", None), (build kind, None) or ("script", scenario)."""
    scripted = max(1, round(count * 0.35)) if count >= 3 else 0
    builds = round(count * 0.25)
    picks: list[tuple[str, Scenario | None]] = []
    # Scripted scenarios in turn, so that a small run still shows each of them.
    picks += [("script", SCENARIOS[i % len(SCENARIOS)]) for i in range(scripted)]
    picks += [(rng.choice(tuple(BUILD_ROUTES)), None) for _ in range(builds)]
    picks += [("enqueue", None)] * (count - len(picks))
    rng.shuffle(picks)
    return picks


async def create_work(
    session: aiohttp.ClientSession, sim_url: str, count: int, rng: random.Random
) -> Plan:
    """Create every job and build on the simulator, as the calling services would."""
    plan = Plan(faults=list(FAULTS))
    await sim_call(session, "PUT", f"{sim_url}/_sim/profile", PROFILE)
    picks = choose(count, rng)
    # Draw every random choice up front so that a seed gives the same mix.
    draws = [(rng.choice(JOB_KEYS), rng.choice(("Build", "Check"))) for _ in picks]

    async def one(i: int, what: str, scenario: Scenario | None) -> Planned:
        key, build_kind = draws[i]
        if scenario is not None:
            body = {"kind": scenario.kind, "steps": scenario.steps}
            rid = str((await sim_call(session, "POST", f"{sim_url}/_sim/script", body))["id"])
            intake = intake_body(
                scenario.kind, rid, timeout_s=scenario.timeout_s,
                labels={"demo": scenario.name},
            )  # fmt: skip
            plan.faults += [{**f, "id": rid} for f in scenario.faults]
            return Planned(
                scenario.name, scenario.kind, intake, scenario.expected, scenario.cancel, rid
            )
        if what == "enqueue":
            url = f"{sim_url}/api/workspace/functions/{key}/enqueue"
            answer = await sim_call(session, "POST", url, {"CorrelationId": f"demo-{i}"})
            intake = intake_body(
                Kind.FUNCTION_JOB, enqueue_response=answer, timeout_s=60,
                labels={"demo": key}, correlation_id=f"demo-{i}",
            )  # fmt: skip
            return Planned(key, Kind.FUNCTION_JOB, intake, remote_id=answer["Data"]["JobId"])
        url = sim_url + BUILD_ROUTES[what]
        answer = await sim_call(session, "POST", url, {"Kind": build_kind})
        intake = intake_body(
            what, enqueue_response=answer, timeout_s=60, labels={"demo": f"{build_kind}"}
        )
        return Planned(build_kind.lower(), what, intake, remote_id=answer["Id"])

    # One after another: the simulator draws each job's and build's outcome as its
    # request arrives, so only a fixed order makes a seed repeat the whole mix.
    plan.items = [await one(i, w, s) for i, (w, s) in enumerate(picks)]
    return plan


async def sim_call(session: aiohttp.ClientSession, method: str, url: str, body: Any = None) -> Any:
    """One request to the simulator: its JSON answer."""
    async with session.request(method, url, json=body) as resp:
        resp.raise_for_status()
        return await resp.json()


async def faults_fired(session: aiohttp.ClientSession, sim_url: str) -> dict[str, int]:
    """How many times each kind of fault was injected so far."""
    fired: dict[str, int] = {}
    for rule in (await sim_call(session, "GET", f"{sim_url}/_sim/faults"))["rules"]:
        if rule["fault"] != "latency" and rule["hits"]:
            fired[rule["fault"]] = fired.get(rule["fault"], 0) + int(rule["hits"])
    return fired
