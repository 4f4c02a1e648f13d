"""Groups through the HTTP API with the simulator: one group event per sealed group,
whose counts match its members' outcomes. Bounded waits only, no timed assertion."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from orchestrator.client import OrchestratorClient
from tests.core.conftest import Api

Q = {"after_s": 0, "status": "Queued"}
ENDS = {"Completed": "succeeded", "Failed": "failed", "Cancelled": "cancelled"}
BOUND_S = 60.0


async def _job(api: Api, end: str | None, after_s: float = 0.2) -> str:
    steps = [Q] if end is None else [Q, {"after_s": after_s, "status": end}]
    return await api.script("function_job", steps, max_attempts=1)


async def _group_events(api: Api, name: str) -> list[dict[str, Any]]:
    status, page = await api.call("GET", "/v1/events?after=0&limit=1000")
    assert status == 200
    return [e for e in page["events"] if ".group." in e["type"] and e["subject"] == name]


async def _wait_group(api: Api, name: str) -> dict[str, Any]:
    """The group once ended, by the server-side wait (bounded)."""
    async with asyncio.timeout(BOUND_S):
        while True:
            status, group = await api.call("GET", f"/v1/groups/{name}?wait=20")
            assert status == 200, group
            if group["ended"]:
                return group  # type: ignore[no-any-return]


async def _members(api: Api, name: str) -> list[dict[str, Any]]:
    status, page = await api.call("GET", f"/v1/trackings?group={name}&limit=1000")
    assert status == 200, page
    assert page["next_cursor"] is None
    return page["items"]  # type: ignore[no-any-return]


async def test_a_sealed_batch_of_200_ends_in_exactly_one_group_event(api: Api) -> None:
    ends = list(ENDS)
    jobs = [await _job(api, ends[i % 3], 0.1 + (i % 7) * 0.05) for i in range(200)]
    items = [{"kind": "function_job", "remote_id": j} for j in jobs]
    status, answer = await api.call(
        "POST", "/v1/trackings/batch", json={"items": items, "group": "import-42", "seal": True},
        headers={"traceparent": "00-" + "c" * 32 + "-" + "d" * 16 + "-01"},
    )  # fmt: skip
    assert status == 200, answer
    assert all(
        i["status"] == 201 and i["tracking"]["group"] == "import-42" for i in answer["items"]
    )
    group = await _wait_group(api, "import-42")
    assert group["state"] == "completed" and group["sealed"]
    members = await _members(api, "import-42")
    assert len(members) == 200 and all(m["state"] == "terminal" for m in members)
    counted = Counter(m["outcome"] for m in members)
    [event] = await _group_events(api, "import-42")
    assert event["type"] == "com.moltaro.orchestrator.group.completed"
    assert event["traceparent"] == "00-" + "c" * 32 + "-" + "d" * 16 + "-01"
    data = event["data"]
    assert {k: v for k, v in data["outcomes"].items() if v} == dict(counted)
    assert data["members"] == {"total": 200, "active": 0, "terminal": 200}
    not_ok = {m["tracking_id"]: m["outcome"] for m in members if m["outcome"] != "succeeded"}
    assert len(data["not_succeeded"]) == min(100, len(not_ok))
    assert all(not_ok[m["tracking_id"]] == m["outcome"] for m in data["not_succeeded"])
    ended_at = sorted(m["terminal_at"] for m in members)
    assert (data["first_end_at"], data["last_end_at"]) == (ended_at[0], ended_at[-1])
    metrics = await api.metrics_text()
    assert 'orchestrator_group_members_sum{outcome="completed"} 200.0' in metrics
    assert 'orchestrator_group_duration_seconds_count{outcome="completed"} 1.0' in metrics
    # Adding to it now is refused, and nothing of the item is kept.
    late = await _job(api, None)
    status, problem = await api.call(
        "POST", "/v1/trackings", json={"kind": "function_job", "remote_id": late, "group": "import-42"}
    )  # fmt: skip
    assert status == 409 and problem["field"] == "group"
    _, page = await api.call("GET", "/v1/trackings?limit=1000")
    assert late not in {t["remote_id"] for t in page["items"]}
    # A member posted again is the same tracking (200), sealed or not.
    status, again = await api.call(
        "POST", "/v1/trackings", json={"kind": "function_job", "remote_id": jobs[0], "group": "import-42"}
    )  # fmt: skip
    assert status == 200 and again["tracking_id"] == answer["items"][0]["tracking"]["tracking_id"]
    assert len(await _group_events(api, "import-42")) == 1


async def test_follow_ups_make_a_group_of_their_own(api: Api) -> None:
    jobs = [await _job(api, "Completed"), await _job(api, "Failed")]
    result = {"Succeeded": True, "FollowUpOperationIds": jobs}
    status, answer = await api.call(
        "POST", "/v1/trackings/follow-ups", json={"runtime_result": result}
    )
    assert status == 200, answer
    name = answer["group"]
    assert name.startswith("follow-ups-")
    assert {t["group"] for t in answer["items"]} == {name}
    group = await _wait_group(api, name)
    assert group["outcomes"]["succeeded"] == 1 and group["outcomes"]["failed"] == 1
    [event] = await _group_events(api, name)
    [failed] = event["data"]["not_succeeded"]
    assert failed["outcome"] == "failed" and failed["remote_id"] == jobs[1]


async def test_an_empty_follow_ups_group_ends_at_once_with_no_members(api: Api) -> None:
    status, answer = await api.call(
        "POST", "/v1/trackings/follow-ups", json={"runtime_result": {"FollowUpOperationIds": []}}
    )
    assert status == 200 and answer["items"] == []
    status, group = await api.call("GET", f"/v1/groups/{answer['group']}")
    assert status == 200 and group["state"] == "completed"
    assert group["members"] == {"total": 0, "active": 0, "terminal": 0}
    assert len(await _group_events(api, answer["group"])) == 1


async def test_sealing_after_every_member_ended_emits_at_once(api: Api) -> None:
    for _ in range(3):
        job = await _job(api, "Completed", 0.05)
        t = await api.track(kind="function_job", remote_id=job, group="late-seal")
        await api.call("GET", f"/v1/trackings/{t['tracking_id']}?wait=30")
    status, group = await api.call("GET", "/v1/groups/late-seal")
    assert status == 200 and group["state"] == "open" and group["members"]["terminal"] == 3
    assert await _group_events(api, "late-seal") == []
    status, sealed = await api.call("POST", "/v1/groups/late-seal/seal")
    assert status == 200 and sealed["state"] == "completed"
    [event] = await _group_events(api, "late-seal")
    assert event["data"]["outcomes"]["succeeded"] == 3
    status, again = await api.call("POST", "/v1/groups/late-seal/seal", json={})
    assert status == 200 and again["sealed_at"] == sealed["sealed_at"]  # idempotent
    assert len(await _group_events(api, "late-seal")) == 1


async def test_a_group_deadline_lists_what_was_still_open(api: Api) -> None:
    done = await _job(api, "Completed", 0.05)
    stuck = await _job(api, None)
    first = await api.track(kind="function_job", remote_id=done, group="slow")
    await api.track(kind="function_job", remote_id=stuck, group="slow")
    await api.call("GET", f"/v1/trackings/{first['tracking_id']}?wait=30")
    status, sealed = await api.call("POST", "/v1/groups/slow/seal", json={"timeout_s": 0.5})
    assert status == 200 and sealed["deadline_at"] is not None
    group = await _wait_group(api, "slow")
    assert group["state"] == "deadline_exceeded"
    [event] = await _group_events(api, "slow")
    assert event["type"] == "com.moltaro.orchestrator.group.deadline_exceeded"
    assert [m["remote_id"] for m in event["data"]["open_members"]] == [stuck]
    # Its members go on: the stuck one is still active.
    _, page = await api.call("GET", "/v1/trackings?group=slow&state=active")
    assert [t["remote_id"] for t in page["items"]] == [stuck]


async def test_expect_seals_the_group_at_its_count(api: Api) -> None:
    jobs = [await _job(api, "Completed", 0.05) for _ in range(3)]
    for job in jobs[:2]:
        await api.track(kind="function_job", remote_id=job, group="two", group_expect=2)
    status, problem = await api.call(
        "POST", "/v1/trackings", json={"kind": "function_job", "remote_id": jobs[2], "group": "two"}
    )
    assert status == 409 and problem["field"] == "group"
    assert (await _wait_group(api, "two"))["state"] == "completed"


async def test_group_wait_answers_the_current_state_at_its_bound(api: Api) -> None:
    await api.track(kind="function_job", remote_id=await _job(api, None), group="waiting")
    status, group = await api.call("GET", "/v1/groups/waiting?wait=0.2")
    assert status == 200 and group["state"] == "open" and not group["ended"]


async def test_groups_are_listed_by_state(api: Api) -> None:
    await api.track(kind="function_job", remote_id=await _job(api, None), group="listed-a")
    await api.track(kind="function_job", remote_id=await _job(api, None), group="listed-b")
    await api.call("POST", "/v1/groups/listed-b/seal")
    status, page = await api.call("GET", "/v1/groups?state=sealed")
    assert status == 200 and [g["group"] for g in page["items"]] == ["listed-b"]
    status, page = await api.call("GET", "/v1/groups?limit=1")
    assert status == 200 and len(page["items"]) == 1 and page["next_cursor"]
    status, rest = await api.call("GET", f"/v1/groups?limit=10&cursor={page['next_cursor']}")
    assert status == 200 and [g["group"] for g in rest["items"]] == ["listed-b"]


@pytest.mark.parametrize("bad", ["", "a b", "../x", "..", "x" * 201, "é", 7])
async def test_an_unsafe_group_name_is_a_422_naming_it(api: Api, bad: object) -> None:
    body = {"kind": "function_job", "remote_id": "J-unsafe", "group": bad}
    status, problem = await api.call("POST", "/v1/trackings", json=body)
    assert status == 422 and problem["field"] == "group", problem
    status, problem = await api.call(
        "POST", "/v1/trackings/batch", json={"items": [{"kind": "function_job", "remote_id": "J-u"}], "group": bad}
    )  # fmt: skip
    assert status == 422 and problem["field"] == "group", problem
    body = {"runtime_result": {"FollowUpOperationIds": ["J-f"]}, "group": bad}
    status, problem = await api.call("POST", "/v1/trackings/follow-ups", json=body)
    assert status == 422 and problem["field"] == "group", problem
    _, page = await api.call("GET", "/v1/trackings")
    assert page["items"] == []


async def test_unknown_groups_are_404(api: Api) -> None:
    for method, path in (
        ("GET", "/v1/groups/nope"),
        ("GET", "/v1/groups/nope?wait=5"),
        ("POST", "/v1/groups/nope/seal"),
        ("GET", "/v1/groups/a%20b"),
    ):
        status, problem = await api.call(method, path)
        assert status == 404, (path, problem)


async def test_an_empty_follow_ups_list_in_a_named_open_group_makes_nothing(api: Api) -> None:
    body = {"runtime_result": {"FollowUpOperationIds": []}, "group": "named-empty"}
    status, answer = await api.call("POST", "/v1/trackings/follow-ups", json=body)
    assert status == 200 and answer == {"items": [], "group": "named-empty"}
    status, _ = await api.call("GET", "/v1/groups/named-empty")
    assert status == 404
    status, answer = await api.call("POST", "/v1/trackings/follow-ups", json={**body, "seal": True})
    assert status == 200
    status, group = await api.call("GET", "/v1/groups/named-empty")
    assert status == 200 and group["state"] == "completed"


async def test_the_client_tracks_follow_ups_in_a_group_and_waits_for_it(api: Api) -> None:
    jobs = [await _job(api, "Completed", 0.05) for _ in range(2)]
    async with OrchestratorClient(api.url, session=api.session) as orch:
        made = await orch.track_follow_ups(
            {"FollowUpOperationIds": jobs}, group="fu-client", seal=True
        )
        assert {t.group for t in made} == {"fu-client"}
        seen: list[int] = []
        ended = await orch.wait_group(
            "fu-client",
            timeout_s=BOUND_S,
            progress_s=1,
            on_change=lambda g: seen.append(g.terminal),
        )
    assert ended.state == "completed" and ended.all_succeeded and seen[-1] == 2
