"""Intake: idempotency, every validation rule, the polling-URL guard, auth."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.core.conftest import Api, StartService

VALID = {"kind": "function_job", "remote_id": "job-1"}


async def test_new_then_existing(api: Api) -> None:
    s1, first = await api.call("POST", "/v1/trackings", json=VALID)
    s2, second = await api.call("POST", "/v1/trackings", json=VALID)
    assert (s1, s2) == (201, 200)
    assert first["tracking_id"] == second["tracking_id"]
    # Same id, other kind: another tracking.
    s3, third = await api.call(
        "POST", "/v1/trackings", json={**VALID, "kind": "net_operation_build"}
    )
    assert s3 == 201 and third["tracking_id"] != first["tracking_id"]
    status, got = await api.call("GET", f"/v1/trackings/{first['tracking_id']}")
    assert status == 200 and got["remote_id"] == "job-1" and got["state"] == "active"


def _future(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"remote_id": "x"}, "kind"),
        ({"kind": "job", "remote_id": "x"}, "kind"),
        ({"kind": "function_job"}, "remote_id"),
        ({"kind": "function_job", "remote_id": ""}, "remote_id"),
        ({"kind": "function_job", "remote_id": "a/b"}, "remote_id"),
        ({"kind": "function_job", "remote_id": ".."}, "remote_id"),
        ({"kind": "function_job", "remote_id": "."}, "remote_id"),
        ({"kind": "function_job", "remote_id": "x" * 201}, "remote_id"),
        ({"kind": "function_job", "remote_id": "a%2Fb"}, "remote_id"),
        ({"kind": "function_job", "remote_id": 42}, "remote_id"),
        ({**VALID, "workspace": "nope"}, "workspace"),
        ({**VALID, "deadline_at": "tomorrow"}, "deadline_at"),
        ({**VALID, "deadline_at": "2020-01-01T00:00:00Z"}, "deadline_at"),
        ({**VALID, "deadline_at": "2030-01-01T00:00:00"}, "deadline_at"),
        ({**VALID, "timeout_s": -1}, "timeout_s"),
        ({**VALID, "timeout_s": "10"}, "timeout_s"),
        ({**VALID, "timeout_s": 10**9}, "timeout_s"),
        ({**VALID, "timeout_s": 10, "deadline_at": None}, None),
        ({**VALID, "callback_url": "http://evil.example/hook"}, "callback_url"),
        ({**VALID, "labels": {"a": 1}}, "labels.a"),
        ({**VALID, "labels": {f"k{i}": "v" for i in range(33)}}, "labels"),
        ({**VALID, "labels": {"bad key": "v"}}, "labels"),
        ({**VALID, "notify": "sometimes"}, "notify"),
        ({**VALID, "correlation_id": ""}, "correlation_id"),
        ({**VALID, "surprise": True}, "surprise"),
        ({"kind": "function_job", "enqueue_response": {"Data": {}}}, "enqueue_response"),
        ({"kind": "function_job", "enqueue_response": {"JobId": "a/b"}}, "enqueue_response"),
        (
            {"kind": "function_job", "remote_id": "job-2", "enqueue_response": {"JobId": "job-3"}},
            "remote_id",
        ),
        ({"kind": "function_job", "enqueue_response": "job-3"}, "enqueue_response"),
        # Adaptive polling's class hints.
        ({**VALID, "function_key": "reports.nightly-export"}, None),
        ({**VALID, "function_key": ""}, "function_key"),
        ({**VALID, "function_key": "two words"}, "function_key"),
        ({**VALID, "function_key": 7}, "function_key"),
        ({**VALID, "function_key": "k" * 201}, "function_key"),
        ({**VALID, "kind": "net_operation_build", "function_key": "f"}, "function_key"),
        ({**VALID, "kind": "workspace_ui_build", "build_kind": "Check"}, None),
        ({**VALID, "kind": "net_operation_build", "build_kind": "Deploy"}, "build_kind"),
        ({**VALID, "kind": "net_operation_build", "build_kind": 0}, "build_kind"),
        ({**VALID, "build_kind": "Build"}, "build_kind"),
    ],
)
async def test_each_validation_rule_names_its_field(
    api: Api, body: dict[str, Any], field: str | None
) -> None:
    status, problem = await api.call("POST", "/v1/trackings", json=body)
    if field is None:
        assert status == 201, problem
        return
    assert status == 422, problem
    assert problem["status"] == 422 and problem["title"]
    assert problem["field"] == field, problem
    assert field.split(".")[0] in problem["detail"]
    # Nothing half-written is kept.
    _, page = await api.call("GET", "/v1/trackings")
    assert page["items"] == []


async def test_deadline_and_timeout_together_rejected(api: Api) -> None:
    status, problem = await api.call(
        "POST", "/v1/trackings", json={**VALID, "timeout_s": 5, "deadline_at": _future(60)}
    )
    assert status == 422 and problem["field"] == "timeout_s"


async def test_deadline_beyond_max_rejected(api: Api) -> None:
    status, problem = await api.call(
        "POST", "/v1/trackings", json={**VALID, "deadline_at": _future(10**6)}
    )
    assert status == 422 and problem["field"] == "deadline_at"


async def test_malformed_and_non_json_bodies(api: Api) -> None:
    status, problem = await api.call(
        "POST", "/v1/trackings", data=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert status == 400 and problem["field"] == "body"
    status, problem = await api.call(
        "POST", "/v1/trackings", data=b"kind=x", headers={"Content-Type": "text/plain"}
    )
    assert status == 415 and problem["field"] == "Content-Type"
    status, problem = await api.call("POST", "/v1/trackings", json=[1, 2])
    assert status == 422 and problem["field"] == "body"


async def test_oversize_body_is_413(start_service: StartService) -> None:
    api = await start_service(server={"max_body_bytes": 2048})
    status, problem = await api.call(
        "POST", "/v1/trackings", json={**VALID, "labels": {"a": "x" * 4000}}
    )
    assert status == 413 and problem["field"] == "body"


@pytest.mark.parametrize(
    "url",
    [
        "http://evil.example/api/workspace/functions/jobs/job-9",
        "//evil.example/api/workspace/functions/jobs/job-9",
        "/api/workspace/functions/jobs/other",
        "/api/workspace/functions/jobs/job-9/../../admin",
        "/api/workspace/admin/ui-project/builds/job-9",
    ],
)
async def test_polling_url_must_be_this_workspace_route(api: Api, url: str) -> None:
    body = {
        "kind": "function_job",
        "enqueue_response": {"Data": {"JobId": "job-9", "StatusUrl": url}},
    }
    status, problem = await api.call("POST", "/v1/trackings", json=body)
    assert status == 422 and problem["field"] == "enqueue_response", problem


async def test_polling_url_of_the_same_route_is_accepted(api: Api) -> None:
    body = {
        "kind": "function_job",
        "enqueue_response": {
            "Data": {"JobId": "job-9", "StatusUrl": "/api/workspace/functions/jobs/job-9"}
        },
    }
    status, out = await api.call("POST", "/v1/trackings", json=body)
    assert status == 201 and out["remote_id"] == "job-9"
    absolute = {
        "kind": "function_job",
        "enqueue_response": {
            "JobId": "job-10",
            "StatusUrl": api.sim_url + "/api/workspace/functions/jobs/job-10",
        },
    }
    status, out = await api.call("POST", "/v1/trackings", json=absolute)
    assert status == 201 and out["remote_id"] == "job-10"


async def test_callback_url_allowlist(start_service: StartService) -> None:
    allow = {"callback_allowlist": ["http://127.0.0.1:9999/hooks"], "callback_signing": "none"}
    api = await start_service(events=allow)
    ok = {**VALID, "callback_url": "http://127.0.0.1:9999/hooks/billing"}
    assert (await api.call("POST", "/v1/trackings", json=ok))[0] == 201
    for bad in (
        "http://127.0.0.1:9999/hooksevil",
        "http://127.0.0.1:9999/hooks@evil.example/",
        "http://evil.example/http://127.0.0.1:9999/hooks",
    ):
        body = {**VALID, "remote_id": "job-77", "callback_url": bad}
        status, problem = await api.call("POST", "/v1/trackings", json=body)
        assert status == 422 and problem["field"] == "callback_url", bad


async def test_batch_answers_in_order_in_one_transaction(api: Api) -> None:
    items = [
        VALID,
        {"kind": "function_job", "remote_id": "../x"},
        VALID,
        {"kind": "workspace_ui_build", "remote_id": "b-1"},
    ]
    status, out = await api.call("POST", "/v1/trackings/batch", json={"items": items})
    assert status == 200
    statuses = [i["status"] for i in out["items"]]
    assert statuses == [201, 422, 200, 201]
    assert out["items"][1]["problem"]["field"] == "items.1.remote_id"
    assert out["items"][0]["tracking"]["tracking_id"] == out["items"][2]["tracking"]["tracking_id"]
    status, problem = await api.call("POST", "/v1/trackings/batch", json={"items": [VALID] * 1001})
    assert status == 422 and problem["field"] == "items"


async def test_follow_ups(api: Api) -> None:
    body = {
        "workspace": "default",
        "runtime_result": {"Succeeded": True, "FollowUpOperationIds": ["job-a", "job-b"]},
    }
    status, out = await api.call("POST", "/v1/trackings/follow-ups", json=body)
    assert status == 200 and [t["remote_id"] for t in out["items"]] == ["job-a", "job-b"]
    assert all(t["kind"] == "function_job" for t in out["items"])
    empty = {"runtime_result": {"followUpOperationIds": []}}
    status, out = await api.call("POST", "/v1/trackings/follow-ups", json=empty)
    assert status == 200 and out["items"] == []
    _, page = await api.call("GET", "/v1/trackings")
    assert len(page["items"]) == 2


async def test_bearer_token_guards_v1(
    start_service: StartService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCH_TEST_TOKENS", "tok-a,tok-b")
    api = await start_service(token=None, server={"api_tokens_env": "ORCH_TEST_TOKENS"})
    for headers in (
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic tok-a"},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer tok-a,tok-b"},
    ):
        status, problem = await api.call("GET", "/v1/trackings", headers=headers)
        assert status == 401 and problem["status"] == 401, headers
    assert (await api.call("GET", "/v1/trackings", headers={"Authorization": "Bearer tok-b"}))[
        0
    ] == 200
    # Health and metrics stay open for probes and scrapers.
    assert (await api.call("GET", "/healthz"))[0] == 200


async def test_refuses_to_start_unauthenticated_on_a_public_address(
    tmp_path: Any, sim_url: str
) -> None:
    from orchestrator.errors import ConfigError
    from orchestrator.service import Service
    from tests.core.conftest import make_settings

    settings = make_settings(
        tmp_path, sim_url, server={"listen": "0.0.0.0:0", "api_tokens_env": "ORCH_NO_SUCH_VAR"}
    )
    with pytest.raises(ConfigError, match=r"server\.api_tokens_env"):
        Service(settings)
    allowed = make_settings(
        tmp_path,
        sim_url,
        server={
            "listen": "0.0.0.0:0",
            "allow_unauthenticated": True,
            "api_tokens_env": "ORCH_NO_SUCH_VAR",
        },
    )
    Service(allowed)
