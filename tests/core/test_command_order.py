"""Cancel, stop-retries and abandon check in the documented order: the request's
shape first (422 naming the field), then the tracking's state (404, 409)."""

from __future__ import annotations

from typing import Any

from tests.core.conftest import Api

UNKNOWN = "trk_" + "f" * 24


async def _ended(api: Api) -> str:
    """A function job's tracking that has ended (abandoned)."""
    tracking = await api.track(kind="function_job", remote_id="job-order-1")
    status, _ = await api.call("DELETE", f"/v1/trackings/{tracking['tracking_id']}")
    assert status == 200
    return str(tracking["tracking_id"])


async def _problem(api: Api, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    status, answer = await api.call(method, path, json=body)
    return status, answer.get("field") if isinstance(answer, dict) else None


async def test_cancel_refuses_a_body_before_saying_the_tracking_has_ended(api: Api) -> None:
    trk = await _ended(api)
    path = f"/v1/trackings/{trk}/cancel"
    assert await _problem(api, "POST", path, {"force": True}) == (422, "body")
    assert await _problem(api, "POST", f"/v1/trackings/{UNKNOWN}/cancel", [1]) == (422, "body")
    status, answer = await api.call("POST", path)
    assert status == 409 and answer["title"] == "Already terminal"


async def test_stop_retries_refuses_a_bad_body_before_saying_the_tracking_has_ended(
    api: Api,
) -> None:
    trk = await _ended(api)
    path = f"/v1/trackings/{trk}/stop-retries"
    assert await _problem(api, "POST", path, {"version": 3}) == (422, "body")
    bad_date = {"expected_modified_at": "yesterday"}
    assert await _problem(api, "POST", path, bad_date) == (422, "expected_modified_at")
    status, answer = await api.call("POST", path)
    assert status == 409 and answer["title"] == "Already terminal"


async def test_abandon_refuses_a_body_before_saying_the_tracking_has_ended(api: Api) -> None:
    trk = await _ended(api)
    path = f"/v1/trackings/{trk}"
    assert await _problem(api, "DELETE", path, {"reason": "done"}) == (422, "body")
    assert await _problem(api, "DELETE", f"/v1/trackings/{UNKNOWN}", [1]) == (422, "body")
    status, answer = await api.call("DELETE", path, json={})  # {} is no body at all
    assert status == 409 and answer["title"] == "Already terminal"
