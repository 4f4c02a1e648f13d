"""Project builds of both types: kinds, success with an artifact, each failure, cancellation."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from tests.simulator.conftest import NET, UI, call, poll_until, set_build

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = range(5)
REASONS = {
    "storage_capacity_exhausted": "53100",
    "publication_commit_unconfirmed": None,
    "compilation_failed": None,
    "check_rule_violation": None,
}


def terminal(body: dict[str, Any]) -> bool:
    return body["Status"] in (SUCCEEDED, FAILED, CANCELLED)


async def submit(client: aiohttp.ClientSession, base: str, kind: Any = None) -> dict[str, Any]:
    status, body = await call(client, "POST", base, {} if kind is None else {"Kind": kind})
    assert status == 200, body
    return body  # type: ignore[no-any-return]


async def test_kinds_differ_by_project_type(client: aiohttp.ClientSession) -> None:
    assert (await submit(client, NET, "Build"))["Kind"] == 0
    assert (await submit(client, NET, "check"))["Kind"] == 1
    assert (await submit(client, NET, 1))["Kind"] == 1
    assert (await submit(client, UI, "Check"))["Kind"] == 0
    assert (await submit(client, UI, "Build"))["Kind"] == 1
    assert (await submit(client, UI))["Kind"] == 1  # no Kind: a Build
    for base, bad in ((NET, 2), (UI, "Deploy"), (NET, True), (UI, [0])):
        status, body = await call(client, "POST", base, {"Kind": bad})
        assert status == 400, body


@pytest.mark.parametrize("base", [NET, UI])
async def test_success_goes_through_running_and_carries_an_artifact(
    client: aiohttp.ClientSession, base: str
) -> None:
    await set_build(client, queue_s=0.1, duration_s=0.3, outcomes={"succeeded": 1})
    build = await submit(client, base)
    assert build["Status"] == QUEUED and build["StartedAt"] is None
    seen = await poll_until(client, f"{base}/{build['Id']}", terminal)
    assert RUNNING in [b["Status"] for b in seen]
    final = seen[-1]
    assert final["Status"] == SUCCEEDED and final["ArtifactId"]
    assert final["CompletedAt"] and final["StartedAt"] and final["Failure"] is None


@pytest.mark.parametrize("reason", sorted(REASONS))
async def test_net_failure_carries_the_failure_object(
    client: aiohttp.ClientSession, reason: str
) -> None:
    await set_build(
        client, queue_s=0, duration_s=0.05, outcomes={"failed": 1}, failure_reasons={reason: 1}
    )
    build = await submit(client, NET)
    final = (await poll_until(client, f"{NET}/{build['Id']}", terminal))[-1]
    assert final["Status"] == FAILED and final["ArtifactId"] is None
    failure = final["Failure"]
    assert failure["ReasonCode"] == reason
    assert failure["SqlState"] == REASONS[reason]
    assert isinstance(failure["Retryable"], bool)
    assert failure["Category"] and failure["SafeTarget"] and failure["RemediationCode"]
    assert failure["Summary"]


async def test_ui_failure_has_error_summary_and_no_failure_object(
    client: aiohttp.ClientSession,
) -> None:
    await set_build(client, queue_s=0, duration_s=0.05, outcomes={"failed": 1})
    build = await submit(client, UI)
    final = (await poll_until(client, f"{UI}/{build['Id']}", terminal))[-1]
    assert final["Status"] == FAILED and final["ErrorSummary"] and final["Failure"] is None


@pytest.mark.parametrize("base", [NET, UI])
async def test_cancelled_build(client: aiohttp.ClientSession, base: str) -> None:
    await set_build(client, queue_s=0, duration_s=0.05, outcomes={"cancelled": 1})
    build = await submit(client, base)
    final = (await poll_until(client, f"{base}/{build['Id']}", terminal))[-1]
    assert final["Status"] == CANCELLED and final["ArtifactId"] is None


async def test_build_ids_are_per_project(client: aiohttp.ClientSession) -> None:
    build = await submit(client, NET)
    status, _ = await call(client, "GET", f"{UI}/{build['Id']}")
    assert status == 404
    status, _ = await call(client, "GET", f"{NET}/bld-unknown")
    assert status == 404
