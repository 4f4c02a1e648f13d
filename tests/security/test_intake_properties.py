"""Hypothesis properties of intake: any JSON either becomes a safe tracking or a 4xx problem."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.api.intake import validate_intake
from orchestrator.api.models import REMOTE_ID_RE
from orchestrator.config import load_settings
from orchestrator.errors import ApiProblem
from orchestrator.vocabulary import FILTER_KINDS
from orchestrator.workfilter import WorkFilter
from tests.security.conftest import Live

NOW = 1_800_000_000.0
SETTINGS = {"events": {"callback_allowlist": ["http://127.0.0.1:9000/callbacks"]}}

json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
field_values = {
    "kind": st.sampled_from(
        [
            "function_job",
            "net_operation_build",
            "workspace_ui_build",
            "trigger_work",
            "action_work",
            "x",
        ]
    )
    | json_values,
    **{
        name: st.text(max_size=210)
        | st.from_regex(r"[A-Za-z0-9._:-]{1,5}", fullmatch=True)
        | json_values
        for name in (
            "trigger_binding_id",
            "entity_id",
            "filter_correlation_id",
            "action_id",
            "job_id",
        )
    },
    "since": st.text(max_size=30)
    | st.sampled_from(["2027-01-01T00:00:00Z", "2027-01-01T00:00:00"]),
    "expect_jobs": st.integers() | json_values,
    "remote_id": st.text(max_size=210)
    | st.from_regex(r"[A-Za-z0-9._:-]{1,5}", fullmatch=True)
    | json_values,
    "enqueue_response": st.fixed_dictionaries(
        {"JobId": st.text(max_size=20) | json_values, "StatusUrl": st.text(max_size=60)}
    )
    | json_values,
    "workspace": st.sampled_from(["default", "Default", "../default"]) | st.text(max_size=10),
    "timeout_s": st.floats() | st.integers() | json_values,
    "deadline_at": st.text(max_size=30)
    | st.sampled_from(["2027-01-01T00:00:00Z", "2027-01-01T00:00:00"]),
    "callback_url": st.text(max_size=60)
    | st.sampled_from(
        ["http://127.0.0.1:9000/callbacks/a", "http://127.0.0.1:9000/callbacks/../x"]
    ),
    "labels": st.dictionaries(st.text(max_size=70), st.text(max_size=210), max_size=34)
    | json_values,
    "notify": st.sampled_from(["terminal", "all", "x"]) | json_values,
    "correlation_id": st.text(max_size=210) | json_values,
}
bodies = st.fixed_dictionaries({}, optional={**field_values, "extra": json_values}) | json_values


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=bodies)
def test_validate_intake_never_crashes_and_never_lets_an_unsafe_tracking_through(body: Any) -> None:
    settings_ = load_settings(None, **SETTINGS)
    try:
        t = validate_intake(body, settings_, NOW)
    except ApiProblem as problem:
        assert 400 <= problem.status < 500
        assert problem.title and problem.to_body()["status"] == problem.status
        return
    found = WorkFilter.from_key(t.remote_id)
    if t.kind in FILTER_KINDS:
        # Stored under the filter's key; what reaches a URL is each id, validated.
        assert found is not None and found.key() == t.remote_id
        ids = [v for k, v in found.fields().items() if k != "filter_correlation_id"]
        assert ids and all(REMOTE_ID_RE.fullmatch(v) and v.strip(".") for v in ids)
    else:
        assert found is None
        assert REMOTE_ID_RE.fullmatch(t.remote_id) and t.remote_id.strip(".")
    assert t.workspace == "default"
    assert NOW < t.deadline_at <= NOW + settings_.polling.max_deadline_s
    if t.callback_url is not None:
        assert t.callback_url.startswith("http://127.0.0.1:9000/callbacks/")
        assert "/../" not in t.callback_url and "@" not in t.callback_url
    assert len(t.labels) <= 32


def test_live_intake_answers_201_200_or_a_problem(live: Live) -> None:
    @settings(
        max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(body=bodies)
    def prop(body: Any) -> None:
        request = urllib.request.Request(
            live.url + "/v1/trackings",
            data=json.dumps(body).encode(),
            headers={**live.auth, "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                status, ctype, answer = resp.status, resp.headers["Content-Type"], json.load(resp)
        except urllib.error.HTTPError as err:
            status, ctype, answer = err.code, err.headers["Content-Type"], json.load(err)
        assert status in (200, 201) or 400 <= status < 500, (status, answer)
        if status >= 400:
            assert ctype.startswith("application/problem+json")
            assert answer["status"] == status and answer["title"]
        else:
            assert REMOTE_ID_RE.fullmatch(answer["remote_id"])

    prop()
