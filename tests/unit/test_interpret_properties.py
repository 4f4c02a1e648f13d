"""Properties of the interpreter over arbitrary bodies: it never raises, never claims
success without the evidence, and always answers something JSON can carry."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.interpret import EnumMap, Phase, Verdict, fallback_enums, interpret

KINDS = ("function_job", "net_operation_build", "workspace_ui_build")
JOB_ENUMS = EnumMap(
    values={
        "status": {0: "Queued", 1: "Leased", 2: "Completed", 3: "Failed", 4: "Cancelled"},
        "run.status": {
            0: "Running",
            1: "Success",
            2: "Failed",
            3: "Skipped",
            4: "Cancelled",
            5: "TimedOut",
        },
    },
    source="openapi",
)
ENUM_MAPS = st.sampled_from(
    [
        JOB_ENUMS,
        fallback_enums("function_job"),
        fallback_enums("net_operation_build"),
        EnumMap({}, "openapi"),
    ]
)

json_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["Completed", "Leased", "Succeeded", "2", "Success", "2026-11-29T19:30:02Z"])
)
json_values = st.recursive(
    json_leaves,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=40,
)


def spellings(name: str) -> list[str]:
    return [name, name[0].lower() + name[1:], name.upper(), name.lower()]


small_leaves = st.none() | st.booleans() | st.integers(-3, 8) | st.floats() | st.text(max_size=6)
small_values = st.recursive(
    small_leaves,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
rolls = st.integers(0, 19)
indexes = st.integers(0, 1000)


def place(draw: st.DrawFn, name: str, good: list[Any], bad: list[Any]) -> dict[str, Any]:
    """Mostly one spelling of the field with a plausible value; sometimes a wrong value,
    no field at all, or several spellings that disagree."""
    names = spellings(name)

    def pick(options: list[Any]) -> Any:
        return options[draw(indexes) % len(options)]

    roll = draw(rolls)
    if roll < 15:
        return {pick(names): pick(good)}
    if roll < 17:
        return {pick(names): pick(bad)}
    if roll < 18:
        return {pick(names): draw(small_leaves)}
    if roll < 19:
        return {}
    return {pick(names): pick(good + bad) for _ in range(draw(st.integers(0, 3)))}


COMPLETED = [2, "2", 2.0, "Completed", "completed", " COMPLETED "]
OTHER_STATUSES = [
    0,
    1,
    3,
    4,
    5,
    -1,
    "Queued",
    "Leased",
    "Failed",
    "Cancelled",
    "Succeeded",
    "Running",
    True,
]
GOOD_RUN = [1, 3, "1", "3", 1.0, "Success", "success", "SKIPPED"]
BAD_RUN = [0, 2, 4, 5, 9, "Running", "Failed", "TimedOut", True, "Successful"]
GOOD_TIMES = ["2026-11-29T19:30:02.000Z", "2026-11-29T19:30:02+01:00", "2026-11-29"]
BAD_TIMES = ["", " ", "yesterday", "2026-13-01T00:00:00Z", 1764444600]
GOOD_DURATIONS = [0, 1, 750, 1.5, 0.0]
BAD_DURATIONS = [-1, -0.5, "750", True, math.nan, math.inf, 10**30]
GOOD_SUMMARIES = ["3 invoices", "x", " ok "]
BAD_SUMMARIES = ["", "   ", "\n\t", 0, ["a"], {"a": 1}]


EVIDENCE = ["Status", "CompletedAt", "DurationMs", "ResultSummary", "Run", "JobStatus"]


@st.composite
def near_job_bodies(draw: st.DrawFn) -> Any:
    """Bodies close to the wire shape, so that the success path is actually exercised.

    Half of them are near misses: complete evidence but for exactly one flaw.
    """
    flaw = draw(st.sampled_from(EVIDENCE)) if draw(st.booleans()) else None

    def put(name: str, good: list[Any], bad: list[Any], key: str | None = None) -> dict[str, Any]:
        if flaw is None:
            return place(draw, name, good, bad)
        options = bad if flaw == (key or name) else good
        return place(draw, name, options, options)

    run: dict[str, Any] = {}
    run.update(put("Status", GOOD_RUN, BAD_RUN))
    run.update(put("CompletedAt", GOOD_TIMES, BAD_TIMES))
    run.update(put("DurationMs", GOOD_DURATIONS, BAD_DURATIONS))
    run.update(put("ResultSummary", GOOD_SUMMARIES, BAD_SUMMARIES))
    run.update(place(draw, "ResultData", [None, {"n": 3}], [math.nan, 2**80]))
    body: dict[str, Any] = put("Status", COMPLETED, OTHER_STATUSES, "JobStatus")
    body.update(put("Run", [run], [None, [run], "run"]))
    body.update(place(draw, "CurrentAttempt", [1, 2], [None, "x", 2**70]))
    body.update(place(draw, "NextRunAt", GOOD_TIMES, BAD_TIMES))
    body.update(draw(st.dictionaries(st.text(max_size=6), small_values, max_size=2)))
    if draw(rolls) < 5:
        envelope: dict[str, Any] = {"Succeeded": True}
        envelope.update(place(draw, "Data", [body], [body]))
        return envelope
    return body


# --- an independent reading of the evidence, written without the interpreter's helpers ---------


def candidates(obj: Any, name: str) -> list[Any]:
    if not isinstance(obj, dict):
        return []
    return [
        v
        for k, v in obj.items()
        if isinstance(k, str) and k.lower() == name.lower() and v is not None
    ]


def means(value: Any, wanted: set[str], table: dict[int, str]) -> bool:
    if isinstance(value, str):
        if value.strip().lower() in {w.lower() for w in wanted}:
            return True
        if value.strip().lstrip("-").isdigit():
            value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return isinstance(value, int) and not isinstance(value, bool) and table.get(value) in wanted


def parses_as_time(value: Any) -> bool:
    if not isinstance(value, str) or not value.strip():
        return False
    try:
        datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def has_success_evidence(body: Any, enums: EnumMap) -> bool:
    """A necessary condition for a function job's success, read independently."""
    models = [body, *[d for d in candidates(body, "Data") if isinstance(d, dict)]]
    job_table = dict(enums.values.get("status", {}))
    run_table = dict(enums.values.get("run.status", {}))
    for model in models:
        if not any(means(s, {"Completed"}, job_table) for s in candidates(model, "Status")):
            continue
        for run in candidates(model, "Run"):
            if not isinstance(run, dict):
                continue
            ok_status = any(
                means(s, {"Success", "Skipped"}, run_table) for s in candidates(run, "Status")
            )
            ok_time = any(parses_as_time(t) for t in candidates(run, "CompletedAt"))
            ok_duration = any(
                isinstance(d, int | float)
                and not isinstance(d, bool)
                and math.isfinite(d)
                and d >= 0
                for d in candidates(run, "DurationMs")
            )
            ok_summary = any(
                isinstance(s, str) and s.strip() for s in candidates(run, "ResultSummary")
            )
            if ok_status and ok_time and ok_duration and ok_summary:
                return True
    return False


def check_shape(verdict: Verdict) -> None:
    assert isinstance(verdict, Verdict)
    assert isinstance(verdict.phase, Phase)
    assert verdict.anomaly != "uninterpretable"
    assert isinstance(verdict.fingerprint, str) and 0 < len(verdict.fingerprint) < 120
    assert (verdict.result is not None) is verdict.terminal
    assert (verdict.anomaly is not None) is (verdict.phase in (Phase.ANOMALY, Phase.INVALID))
    if verdict.next_run_at is not None:
        assert math.isfinite(verdict.next_run_at)
    for part in (verdict.result, verdict.details):
        json.dumps(part, allow_nan=False)
        orjson.dumps(part)


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(kind=st.sampled_from(KINDS), body=json_values, enums=ENUM_MAPS)
def test_any_json_never_raises(kind: str, body: Any, enums: EnumMap) -> None:
    verdict = interpret(kind, body, enums)
    check_shape(verdict)
    if kind == "function_job" and verdict.phase is Phase.SUCCEEDED:
        assert has_success_evidence(body, enums)


@SETTINGS
@given(body=near_job_bodies(), enums=ENUM_MAPS)
def test_job_success_only_with_evidence(body: Any, enums: EnumMap) -> None:
    verdict = interpret("function_job", body, enums)
    check_shape(verdict)
    if verdict.phase is Phase.SUCCEEDED:
        assert has_success_evidence(body, enums)
        assert verdict.result is not None
        assert verdict.result["run_status"] in {"Success", "Skipped"}
        assert verdict.result["result_summary"].strip()


@settings(max_examples=100, deadline=None)
@given(kind=st.sampled_from(KINDS), body=near_job_bodies(), enums=ENUM_MAPS)
def test_interpretation_is_deterministic(kind: str, body: Any, enums: EnumMap) -> None:
    assert interpret(kind, body, enums) == interpret(kind, body, enums)


def test_the_near_body_strategy_reaches_success() -> None:
    # Guards the property above against a strategy that never produces a success.
    seen: set[Phase] = set()

    @settings(max_examples=300, deadline=None, database=None)
    @given(body=near_job_bodies())
    def collect(body: Any) -> None:
        seen.add(interpret("function_job", body, JOB_ENUMS).phase)

    collect()
    assert Phase.SUCCEEDED in seen
    assert Phase.ANOMALY in seen
