"""The server-side wait: ``GET /v1/trackings/{id}?wait=S``.

No timed assertion: a wait of 60 s that answers terminal inside a bound far
below 60 s was woken by the terminal write, and a caller's leaving is seen
through the ``orchestrator_api_waits`` gauge going back to 0.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from tests.core.conftest import Api

Q = {"after_s": 0, "status": "Queued"}
BOUND_S = 20.0  # far under the waits' 60 s: an answer within it was woken, not timed out


async def _waits(api: Api) -> int:
    match = re.search(r"^orchestrator_api_waits (\S+)$", await api.metrics_text(), re.M)
    assert match is not None
    return int(float(match.group(1)))


async def _until_waits(api: Api, n: int) -> None:
    async with asyncio.timeout(BOUND_S):
        while await _waits(api) != n:
            await asyncio.sleep(0.02)


async def _queued_tracking(api: Api) -> str:
    job = await api.script("function_job", [Q])
    return str((await api.track(kind="function_job", remote_id=job))["tracking_id"])


async def test_wait_answers_when_the_terminal_write_commits(api: Api) -> None:
    tid = await _queued_tracking(api)
    waiting = asyncio.create_task(api.call("GET", f"/v1/trackings/{tid}?wait=60"))
    await _until_waits(api, 1)
    assert not waiting.done()
    status, abandoned = await api.call("DELETE", f"/v1/trackings/{tid}")
    assert status == 200, abandoned
    async with asyncio.timeout(BOUND_S):
        status, body = await waiting
    assert status == 200, body
    assert body["state"] == "terminal" and body["outcome"] == "abandoned"
    assert await _waits(api) == 0


async def test_wait_on_a_job_that_ends_by_itself(api: Api) -> None:
    job = await api.script(
        "function_job", [Q, {"after_s": 0.3, "status": "Failed"}], max_attempts=1
    )
    tid = (await api.track(kind="function_job", remote_id=job))["tracking_id"]
    async with asyncio.timeout(BOUND_S):
        status, body = await api.call("GET", f"/v1/trackings/{tid}?wait=60")
    assert status == 200, body
    assert body["state"] == "terminal"


async def test_wait_on_an_ended_tracking_answers_at_once(api: Api) -> None:
    tid = await _queued_tracking(api)
    await api.call("DELETE", f"/v1/trackings/{tid}")
    async with asyncio.timeout(BOUND_S):
        status, body = await api.call("GET", f"/v1/trackings/{tid}?wait=60")
    assert status == 200 and body["outcome"] == "abandoned"


async def test_wait_answers_the_current_state_at_its_bound(api: Api) -> None:
    tid = await _queued_tracking(api)
    status, body = await api.call("GET", f"/v1/trackings/{tid}?wait=0.2")
    assert status == 200, body
    assert body["state"] == "active" and body["tracking_id"] == tid
    assert await _waits(api) == 0


async def test_a_wait_whose_caller_left_holds_nothing(api: Api) -> None:
    tid = await _queued_tracking(api)
    waiting = asyncio.create_task(api.call("GET", f"/v1/trackings/{tid}?wait=60"))
    await _until_waits(api, 1)
    waiting.cancel()  # closes the connection mid-wait
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await _until_waits(api, 0)  # long before the wait's 60 s


@pytest.mark.parametrize("bad", ["61", "-1", "abc", "1e3", "", "0x10", "٣"])
async def test_a_bad_wait_is_a_422_naming_it(api: Api, bad: str) -> None:
    tid = await _queued_tracking(api)
    status, problem = await api.call("GET", f"/v1/trackings/{tid}?wait={bad}")
    assert status == 422, problem
    assert problem["field"] == "wait"


async def test_wait_on_an_unknown_tracking_is_404(api: Api) -> None:
    status, problem = await api.call("GET", "/v1/trackings/trk_000000000000000000000000?wait=5")
    assert status == 404, problem


async def test_delete_takes_no_wait(api: Api) -> None:
    tid = await _queued_tracking(api)
    status, problem = await api.call("DELETE", f"/v1/trackings/{tid}?wait=5")
    assert status == 422 and problem["field"] == "wait"
