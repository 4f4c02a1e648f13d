"""Cancel and stop-retries, the commands the service forwards for a caller (issue #37).

Bad input is a 422 naming the field and nothing goes out (the simulator's
request log shows it); the workspace's 4xx refusal comes back as that refusal
with its problem details; its trouble (5xx, back-pressure, no connection, no
answer in time) as 502/503/504 naming the kind. Accepted commands are covered in
tests/core/test_api.py and tests/platform/test_jobs.py.
"""

from __future__ import annotations

from typing import Any

from tests.platform.conftest import Api

QUEUED = [{"after_s": 0, "status": "Queued"}]
VERSION = "2026-05-01T12:00:00.000Z"  # well-formed; faults answer before it is compared


async def fault(api: Api, route: str, rid: str, **rule: Any) -> None:
    """Every request of the service to ``route`` for ``rid`` answers as ``rule`` says."""
    status, body = await api.sim(
        "PUT", "/_sim/faults", {"rules": [{"route": route, "id": rid, **rule}]}
    )
    assert status == 200, body


async def commands(api: Api, rid: str) -> list[dict[str, Any]]:
    """What the service (never the test itself) sent about ``rid`` beyond status reads."""
    return [
        r
        for r in await api.requests_for(rid)
        if r["replica"] is not None and r["route"] != "job_status"
    ]


async def queued_job(api: Api) -> tuple[str, str]:
    """(remote id, tracking id) of a job that stays Queued, cancellable and stoppable."""
    rid = await api.script("function_job", QUEUED)
    tracking = await api.track(kind="function_job", remote_id=rid)
    return rid, tracking["tracking_id"]


# -- bad input: 422 naming the field, nothing sent -------------------------------


async def test_stop_retries_bad_version_is_a_422_and_nothing_is_sent(api: Api) -> None:
    rid, tid = await queued_job(api)
    path = f"/v1/trackings/{tid}/stop-retries"
    for bad in ("yesterday", "2026-02-30T00:00:00Z", "2026-05-01T12:00:00", 20260501, "9" * 65):
        status, body = await api.call("POST", path, json={"expected_modified_at": bad})
        assert status == 422, (bad, body)
        assert body["field"] == "expected_modified_at", body
        assert body["detail"].startswith("expected_modified_at: "), body
    for bad_body in ([], {"expected_modified_at": VERSION, "force": True}):
        status, body = await api.call("POST", path, json=bad_body)
        assert status == 422 and body["field"] == "body", body
    assert await commands(api, rid) == []


async def test_cancel_with_a_body_is_a_422_and_nothing_is_sent(api: Api) -> None:
    rid, tid = await queued_job(api)
    for bad_body in ({"reason": "no longer needed"}, [], "now"):
        status, body = await api.call("POST", f"/v1/trackings/{tid}/cancel", json=bad_body)
        assert status == 422 and body["field"] == "body", (bad_body, body)
    assert await commands(api, rid) == []
    # {} is no input at all: the cancel goes out.
    status, body = await api.call("POST", f"/v1/trackings/{tid}/cancel", json={})
    assert status == 202, body
    assert [r["route"] for r in await commands(api, rid)] == ["job_cancel"]


# -- the workspace's refusal, reported as that refusal ---------------------------

# (the workspace's status, ours)
REFUSALS = ((400, 422), (422, 422), (410, 422), (404, 404))


async def test_stop_retries_refused_by_the_workspace_is_that_refusal(api: Api) -> None:
    rid, tid = await queued_job(api)
    path = f"/v1/trackings/{tid}/stop-retries"
    for theirs, ours in REFUSALS:
        await fault(api, "admin", rid, fault="http_5xx", status=theirs)
        status, body = await api.call("POST", path, json={"expected_modified_at": VERSION})
        assert status == ours, (theirs, body)
        assert body["workspace_status"] == theirs, body
        assert body["workspace_problem"]["status"] == theirs, body
        assert body["workspace_problem"]["detail"] == "Injected server error.", body
        assert "error_kind" not in body, body
        if ours == 422:
            assert body["title"] == "Refused by the workspace", body
    sent = await commands(api, rid)
    assert [(r["method"], r["status"]) for r in sent] == [("POST", s) for s, _ in REFUSALS]


async def test_cancel_refused_by_the_workspace_is_that_refusal(api: Api) -> None:
    rid, tid = await queued_job(api)
    for theirs, ours in (*REFUSALS, (409, 409)):
        await fault(api, "job_cancel", rid, fault="http_5xx", status=theirs)
        status, body = await api.call("POST", f"/v1/trackings/{tid}/cancel")
        assert status == ours, (theirs, body)
        assert body["workspace_status"] == theirs, body
        assert body["workspace_problem"]["status"] == theirs, body
        assert body["remote_status"] == "Queued", body
        assert "error_kind" not in body, body
        expected_title = {409: "Cannot cancel", 404: "Not found"}.get(ours)
        assert body["title"] == (expected_title or "Refused by the workspace"), body
    assert len(await commands(api, rid)) == len(REFUSALS) + 1


# -- the workspace's trouble, named ----------------------------------------------

# (fault rule, our status, error_kind, the workspace's status)
TROUBLE: tuple[tuple[dict[str, Any], int, str, int | None], ...] = (
    ({"fault": "http_5xx", "status": 500}, 502, "http_5xx", 500),
    ({"fault": "reset"}, 502, "connection", None),
    # Retry-After 0: our 503 says so, and the workspace is not held back for the next case.
    ({"fault": "rate_limited", "retry_after_s": 0}, 503, "rate_limited", 429),
    ({"fault": "unavailable", "retry_after_s": 0}, 503, "http_5xx", 503),
    # Past the service's 2 s request timeout: no answer in time.
    ({"fault": "latency", "latency_s": 3}, 504, "timeout", None),
)


async def _trouble_cases(api: Api, route: str, rid: str, call: Any) -> None:
    for rule, ours, kind, theirs in TROUBLE:
        await fault(api, route, rid, **rule)
        status, body, headers = await call()
        assert status == ours, (rule, body)
        assert body["error_kind"] == kind, (rule, body)
        assert body["workspace_status"] == theirs, (rule, body)
        assert "workspace_problem" not in body, body
        assert (ours == 503) == ("Retry-After" in headers), (rule, headers)


async def _post(api: Api, path: str, json: Any = None) -> tuple[int, Any, Any]:
    async with api.session.post(api.url + path, json=json) as resp:
        return resp.status, await resp.json(content_type=None), resp.headers


async def test_stop_retries_workspace_trouble_is_named(api: Api) -> None:
    rid, tid = await queued_job(api)
    path = f"/v1/trackings/{tid}/stop-retries"
    await _trouble_cases(
        api, "admin", rid, lambda: _post(api, path, {"expected_modified_at": VERSION})
    )


async def test_cancel_workspace_trouble_is_named(api: Api) -> None:
    rid, tid = await queued_job(api)
    await _trouble_cases(api, "job_cancel", rid, lambda: _post(api, f"/v1/trackings/{tid}/cancel"))
