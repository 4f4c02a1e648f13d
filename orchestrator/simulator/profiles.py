"""How simulated work behaves: durations, outcome mixes, retries and default faults.

A profile has a default behaviour for function jobs and for builds, and
overrides per function key and per (project, build kind). Every random choice
is drawn from the simulator's seeded ``random.Random``, so a seed makes a run
repeatable.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

JOB_OUTCOMES = ("success", "skipped", "failed", "timed_out", "hang")
BUILD_OUTCOMES = ("succeeded", "failed", "cancelled")
FAILURE_REASONS = (
    "storage_capacity_exhausted",
    "publication_commit_unconfirmed",
    "compilation_failed",
    "check_rule_violation",
)
PROJECTS = ("net", "ui")


@dataclass(frozen=True, slots=True)
class Dist:
    """A uniform duration in seconds between ``lo`` and ``hi``."""

    lo: float
    hi: float

    def draw(self, rng: random.Random) -> float:
        return self.lo if self.hi <= self.lo else rng.uniform(self.lo, self.hi)

    @classmethod
    def of(cls, raw: object) -> Dist:
        if isinstance(raw, Dist):
            return raw
        if isinstance(raw, int | float) and not isinstance(raw, bool) and raw >= 0:
            return cls(float(raw), float(raw))
        if (
            isinstance(raw, list | tuple)
            and len(raw) == 2
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in raw)
            and 0 <= raw[0] <= raw[1]
        ):
            return cls(float(raw[0]), float(raw[1]))
        raise ValueError("a duration is a number of seconds or [lo, hi]")


def pick(rng: random.Random, weights: dict[str, float]) -> str:
    names = [k for k, w in weights.items() if w > 0]
    if len(names) == 1:
        return names[0]
    return rng.choices(names, [weights[k] for k in names])[0]


@dataclass(frozen=True, slots=True)
class JobBehaviour:
    pickup_s: Dist = Dist(0.3, 1.5)  # queued -> leased (also after NextRunAt)
    duration_s: Dist = Dist(1.0, 5.0)  # leased -> terminal run
    outcomes: dict[str, float] = field(
        default_factory=lambda: {"success": 0.84, "skipped": 0.03, "failed": 0.1, "timed_out": 0.03}
    )
    max_attempts: int = 3
    retry_delay_s: float = 3.0
    # The runtime's Job default (what a null TimeoutSeconds means), named in a
    # timed-out error; a job shows TimeoutSeconds only when its publication declares one.
    timeout_seconds: int | None = 300
    lease_timeout_s: float = 30.0  # a hung lease counts as expired after this
    # Fixed outcomes per attempt (the last one repeats) instead of random draws,
    # e.g. ("failed", "success") for a retry that then succeeds.
    sequence: tuple[str, ...] = ()

    def outcome(self, rng: random.Random, attempt: int) -> str:
        if self.sequence:
            return self.sequence[min(attempt, len(self.sequence)) - 1]
        return pick(rng, self.outcomes)


@dataclass(frozen=True, slots=True)
class BuildBehaviour:
    queue_s: Dist = Dist(0.5, 2.0)
    duration_s: Dist = Dist(2.0, 6.0)
    outcomes: dict[str, float] = field(
        default_factory=lambda: {"succeeded": 0.86, "failed": 0.11, "cancelled": 0.03}
    )
    failure_reasons: dict[str, float] = field(
        default_factory=lambda: {
            "storage_capacity_exhausted": 0.25,
            "publication_commit_unconfirmed": 0.25,
            "compilation_failed": 0.3,
            "check_rule_violation": 0.2,
        }
    )


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    job: JobBehaviour = JobBehaviour()
    jobs_by_key: dict[str, JobBehaviour] = field(default_factory=dict)
    build: BuildBehaviour = BuildBehaviour()
    builds_by_kind: dict[tuple[str, str], BuildBehaviour] = field(default_factory=dict)
    request_log: bool = True
    faults: tuple[dict[str, Any], ...] = ()  # fault rules installed at start and on reset
    # Status reads answered by the front (simulator/front.py) rather than aiohttp.
    fast_reads: bool = False
    # The Function operations list routes' filter parameters: per route ("jobs",
    # "runs"), documented name -> the name this installation declares and reads.
    # A name mapped to None is neither declared nor read (an older installation).
    filter_names: dict[str, dict[str, str | None]] = field(default_factory=dict)

    def filter_name(self, route: str, documented: str) -> str | None:
        """The query name a list route reads for a documented filter (None: none)."""
        return self.filter_names.get(route, {}).get(documented, documented)

    def job_for(self, function_key: str) -> JobBehaviour:
        return self.jobs_by_key.get(function_key, self.job)

    def build_for(self, project: str, kind_name: str) -> BuildBehaviour:
        return self.builds_by_kind.get((project, kind_name), self.build)


def _checked_weights(raw: object, allowed: tuple[str, ...], what: str) -> dict[str, float]:
    if not isinstance(raw, dict) or not raw:
        raise ValueError(f"{what} is an object of weights")
    out: dict[str, float] = {}
    for key, weight in raw.items():
        if key not in allowed:
            raise ValueError(f"{what}: unknown outcome {key!r}")
        if not isinstance(weight, int | float) or isinstance(weight, bool) or weight < 0:
            raise ValueError(f"{what}: weights are non-negative numbers")
        out[key] = float(weight)
    if sum(out.values()) <= 0:
        raise ValueError(f"{what}: at least one weight must be positive")
    return out


def job_behaviour_with(base: JobBehaviour, raw: dict[str, Any]) -> JobBehaviour:
    """``base`` with the fields of a JSON object replaced (the control API's overrides)."""
    changes: dict[str, Any] = {}
    for key, value in raw.items():
        if key in ("pickup_s", "duration_s"):
            changes[key] = Dist.of(value)
        elif key == "outcomes":
            changes[key] = _checked_weights(value, JOB_OUTCOMES, "outcomes")
        elif key == "max_attempts" and isinstance(value, int) and 1 <= value <= 100:
            changes[key] = value
        elif key in ("retry_delay_s", "lease_timeout_s") and _non_negative(value):
            changes[key] = float(value)
        elif key == "sequence":
            if not isinstance(value, list) or not all(v in JOB_OUTCOMES for v in value):
                raise ValueError(f"sequence is a list of outcomes from {JOB_OUTCOMES}")
            changes[key] = tuple(value)
        elif key == "timeout_seconds" and (value is None or (_non_negative(value))):
            changes[key] = None if value is None else int(value)
        else:
            raise ValueError(f"job behaviour: bad or unknown field {key!r}")
    return replace(base, **changes)


def build_behaviour_with(base: BuildBehaviour, raw: dict[str, Any]) -> BuildBehaviour:
    changes: dict[str, Any] = {}
    for key, value in raw.items():
        if key in ("queue_s", "duration_s"):
            changes[key] = Dist.of(value)
        elif key == "outcomes":
            changes[key] = _checked_weights(value, BUILD_OUTCOMES, "outcomes")
        elif key == "failure_reasons":
            changes[key] = _checked_weights(value, FAILURE_REASONS, "failure_reasons")
        else:
            raise ValueError(f"build behaviour: bad or unknown field {key!r}")
    return replace(base, **changes)


def _non_negative(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _chaos_faults() -> tuple[dict[str, Any], ...]:
    status_routes = ("job_status", "build_status")
    rules: list[dict[str, Any]] = [
        {"route": "*", "fault": "latency", "ratio": 0.1, "latency_s": 0.3},
        {"route": "job_enqueue", "fault": "http_5xx", "ratio": 0.02, "status": 502},
    ]
    for route in status_routes:
        rules += [
            {"route": route, "fault": "http_5xx", "ratio": 0.05, "status": 500},
            {"route": route, "fault": "rate_limited", "ratio": 0.03, "retry_after_s": 1},
            {
                "route": route,
                "fault": "unavailable",
                "ratio": 0.03,
                "retry_after_s": 2,
                "retry_after_format": "http_date",
            },
            {"route": route, "fault": "reset", "ratio": 0.02},
            {"route": route, "fault": "malformed", "ratio": 0.02},
            {"route": route, "fault": "not_found", "ratio": 0.02},
        ]
    return tuple(rules)


def _fast_job() -> JobBehaviour:
    return JobBehaviour(
        pickup_s=Dist(0.05, 0.2),
        duration_s=Dist(0.1, 0.5),
        max_attempts=2,
        retry_delay_s=0.2,
        timeout_seconds=60,
        lease_timeout_s=1.0,
    )


def _adaptive_mix() -> dict[str, JobBehaviour]:
    """The benchmark's work classes for adaptive polling: some tight, one spread, and one
    that drifts (``.later`` is what ``bench.adaptive.drift`` takes in a run's second half)."""
    quick = Dist(0.2, 0.3)
    runs = {
        "bench.adaptive.brief": Dist(0.8, 1.0),
        "bench.adaptive.steady": Dist(3.8, 4.2),
        "bench.adaptive.long": Dist(7.6, 8.4),
        "bench.adaptive.spread": Dist(0.5, 9.0),
        "bench.adaptive.drift": Dist(1.8, 2.2),
        "bench.adaptive.drift.later": Dist(5.5, 6.0),
    }
    return {key: JobBehaviour(pickup_s=quick, duration_s=run) for key, run in runs.items()}


def builtin_profiles() -> dict[str, Profile]:
    """A fresh copy of the bundled profiles (built on call: nothing at import time)."""
    default = Profile(
        name="default",
        jobs_by_key={
            "reports.nightly-export": JobBehaviour(
                duration_s=Dist(8.0, 20.0), max_attempts=2, timeout_seconds=900
            ),
        },
        builds_by_kind={
            ("net", "Check"): BuildBehaviour(duration_s=Dist(1.0, 3.0)),
            ("ui", "Check"): BuildBehaviour(duration_s=Dist(1.0, 2.5)),
        },
    )
    fast = builtin_fast()
    bench = Profile(
        name="bench",
        job=JobBehaviour(
            pickup_s=Dist(0.5, 2.0),
            duration_s=Dist(2.0, 8.0),
            outcomes={"success": 0.9, "skipped": 0.02, "failed": 0.08},
            max_attempts=2,
            retry_delay_s=1.0,
        ),
        jobs_by_key=_adaptive_mix(),
        build=BuildBehaviour(queue_s=Dist(0.5, 2.0), duration_s=Dist(2.0, 8.0)),
        request_log=False,
        fast_reads=True,
    )
    chaos = Profile(
        name="chaos",
        job=replace(
            _fast_job(),
            pickup_s=Dist(0.1, 1.0),
            duration_s=Dist(0.3, 3.0),
            max_attempts=3,
            retry_delay_s=0.5,
            outcomes={
                "success": 0.6,
                "skipped": 0.05,
                "failed": 0.25,
                "timed_out": 0.07,
                "hang": 0.03,
            },
        ),
        build=BuildBehaviour(
            queue_s=Dist(0.1, 1.0),
            duration_s=Dist(0.3, 3.0),
            outcomes={"succeeded": 0.6, "failed": 0.3, "cancelled": 0.1},
        ),
        faults=_chaos_faults(),
    )
    return {p.name: p for p in (default, fast, bench, chaos, _renamed())}


def _renamed() -> Profile:
    """``fast``, on an installation whose lists name their filters otherwise (camelCase,
    other words, a Filter. prefix) and that has no search filter."""
    common: dict[str, str | None] = {
        "FunctionId": "businessFunctionId",
        "Source": "jobSource",
        "ScheduleId": "Filter.ScheduleId",
        "TriggerBindingId": "bindingId",
        "ActionId": "uiActionId",
        "EntityId": "recordId",
        "Search": None,
        "Status": "state",
        "Limit": "pageSize",
    }
    jobs = {**common, "From": "createdFrom", "To": "createdTo"}
    runs = {**common, "From": "startedFrom", "To": "startedTo"}
    fast = builtin_fast()
    return replace(fast, name="renamed", filter_names={"jobs": jobs, "runs": runs})


def builtin_fast() -> Profile:
    fast_build = BuildBehaviour(queue_s=Dist(0.05, 0.2), duration_s=Dist(0.1, 0.8))
    return Profile(name="fast", job=_fast_job(), build=fast_build)
