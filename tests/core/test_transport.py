"""Transport trouble is never terminal; the server's guidance is obeyed."""

from __future__ import annotations

import asyncio
import time

from orchestrator.clock import parse_iso
from tests.core.conftest import Api

Q = {"after_s": 0, "status": "Queued"}


def _gets(requests: list[dict]) -> list[float]:
    return [r["t"] for r in requests if r["method"] == "GET"]


async def test_retry_after_seconds_blocks_the_workspace(api: Api) -> None:
    rid = await api.script("function_job", [Q, {"after_s": 0.1, "status": "Completed"}])
    await api.sim(
        "PUT",
        "/_sim/faults",
        {
            "rules": [
                {
                    "route": "job_status",
                    "fault": "rate_limited",
                    "retry_after_s": 1,
                    "retry_after_format": "seconds",
                    "max_hits": 1,
                }
            ]
        },
    )
    t = await api.track(kind="function_job", remote_id=rid)
    done = await api.wait_terminal(t["tracking_id"])
    assert done["outcome"] == "succeeded"
    reqs = [r for r in await api.requests_for(rid) if r["method"] == "GET"]
    limited = [r for r in reqs if r["status"] == 429]
    assert len(limited) == 1
    after = [r["t"] for r in reqs if r["t"] > limited[0]["t"]]
    assert after and min(after) - limited[0]["t"] >= 0.95
    text = await api.metrics_text()
    assert (
        'orchestrator_polls_total{kind="function_job",result="rate_limited",workspace="default"} 1.0'
        in text
    )


async def test_retry_after_http_date_blocks_other_trackings_too(api: Api) -> None:
    first = await api.script("function_job", [Q, {"after_s": 0.1, "status": "Completed"}])
    other = await api.script("function_job", [Q, {"after_s": 0.1, "status": "Completed"}])
    # The date form has one-second resolution: the wait is 1-2.2 s.
    await api.sim(
        "PUT",
        "/_sim/faults",
        {
            "rules": [
                {
                    "route": "job_status",
                    "id": first,
                    "fault": "unavailable",
                    "retry_after_s": 2,
                    "retry_after_format": "http_date",
                    "max_hits": 1,
                }
            ]
        },
    )
    a = await api.track(kind="function_job", remote_id=first)
    await asyncio.sleep(0.3)
    b = await api.track(kind="function_job", remote_id=other)
    assert (await api.wait_terminal(a["tracking_id"]))["outcome"] == "succeeded"
    assert (await api.wait_terminal(b["tracking_id"]))["outcome"] == "succeeded"
    refused = [r["t"] for r in await api.requests_for(first) if r["status"] == 503]
    assert len(refused) == 1
    # The other tracking arrived inside the wait, so only the wait held its reads:
    # its first read waited out the Retry-After (an HTTP date: 1-2.2 s after the 503).
    created_b = parse_iso(b["created_at"])
    assert refused[0] < created_b < refused[0] + 0.9
    others = _gets(await api.requests_for(other))
    assert others and min(others) >= refused[0] + 0.9


async def test_next_run_at_is_not_polled_early(api: Api) -> None:
    # Taken before the script: its NextRunAt is at least one second after this.
    created = time.time()
    rid = await api.script(
        "function_job",
        [
            {
                "after_s": 0,
                "status": "Queued",
                "next_run_at_in_s": 1.0,
                "fields": {"WillRetry": True},
            },
            {"after_s": 1.0, "status": "Leased"},
            {"after_s": 1.1, "status": "Completed"},
        ],
    )
    t = await api.track(kind="function_job", remote_id=rid)
    assert (await api.wait_terminal(t["tracking_id"]))["outcome"] == "succeeded"
    gets = _gets(await api.requests_for(rid))
    early = [g for g in gets if g < created + 0.95]
    # At most the first read, which discovered NextRunAt.
    assert len(early) <= 1


async def test_not_found_needs_confirmations_over_time(api: Api) -> None:
    rid = await api.script("function_job", [{"after_s": 0, "not_found": True}])
    t = await api.track(kind="function_job", remote_id=rid)
    done = await api.wait_terminal(t["tracking_id"])
    assert done["outcome"] == "not_found"
    gets = [r for r in await api.requests_for(rid) if r["method"] == "GET"]
    assert len(gets) >= 3
    assert all(r["status"] == 404 for r in gets)
    # not_found_min_s is 0.3 s between the answers; arrival times may differ a little.
    assert gets[-1]["t"] - gets[0]["t"] >= 0.25


async def test_a_404_window_is_not_terminal(api: Api) -> None:
    rid = await api.script(
        "function_job",
        [
            {"after_s": 0, "not_found": True},
            {"after_s": 0.15, "status": "Leased"},
            {"after_s": 0.4, "status": "Completed"},
        ],
    )
    t = await api.track(kind="function_job", remote_id=rid)
    assert (await api.wait_terminal(t["tracking_id"]))["outcome"] == "succeeded"


async def test_5xx_401_malformed_reset_are_never_terminal(api: Api) -> None:
    rid = await api.script("function_job", [Q, {"after_s": 0.1, "status": "Completed"}])
    await api.sim(
        "PUT",
        "/_sim/faults",
        {
            "rules": [
                {"route": "job_status", "fault": "http_5xx", "status": 500, "max_hits": 1},
                {
                    "route": "job_status",
                    "fault": "http_5xx",
                    "status": 401,
                    "start_s": 0,
                    "max_hits": 1,
                },
                {"route": "job_status", "fault": "malformed", "max_hits": 1},
                # aiohttp retries a reset keep-alive connection once by itself: two resets
                # make one surface as transport trouble.
                {"route": "job_status", "fault": "reset", "max_hits": 2},
            ]
        },
    )
    t = await api.track(kind="function_job", remote_id=rid)
    done = await api.wait_terminal(t["tracking_id"])
    assert done["outcome"] == "succeeded"
    text = await api.metrics_text()
    for result in ("http_5xx", "invalid_response", "connection"):
        line = (
            f'orchestrator_polls_total{{kind="function_job",result="{result}",workspace="default"}}'
        )
        value = float(text.split(line, 1)[1].split("\n", 1)[0])
        assert value >= 1, result


async def test_deadline_reports_latest_state_and_sends_no_post(api: Api) -> None:
    rid = await api.script("function_job", [Q, {"after_s": 0.05, "status": "Leased"}])
    t = await api.track(kind="function_job", remote_id=rid, timeout_s=0.8)
    done = await api.wait_terminal(t["tracking_id"])
    assert done["outcome"] == "deadline_exceeded"
    assert done["result"]["remote_id"] == rid
    assert done["result"]["last_remote_status"] == "Leased"
    assert done["remote"]["Status"] in (1, "Leased")
    reqs = await api.requests_for(rid)
    assert {r["method"] for r in reqs} == {"GET"}
    # The last read happened at (not long before) the deadline.
    assert len(reqs) >= 2


async def test_deadline_while_workspace_is_down_keeps_last_error(api: Api) -> None:
    rid = await api.script("function_job", [Q])
    await api.sim(
        "PUT",
        "/_sim/faults",
        {"rules": [{"route": "job_status", "fault": "http_5xx", "status": 502}]},
    )
    t = await api.track(kind="function_job", remote_id=rid, timeout_s=0.6)
    done = await api.wait_terminal(t["tracking_id"])
    assert done["outcome"] == "deadline_exceeded"
    assert done["result"]["last_error"]["kind"] == "http_5xx"
    assert done["last_error"]["kind"] == "http_5xx"
    text = await api.metrics_text()
    assert 'orchestrator_workspace_up{workspace="default"} 0.0' in text


async def test_401_and_403_are_transport_trouble_not_outcomes(api: Api) -> None:
    rid = await api.script("function_job", [Q, {"after_s": 0.1, "status": "Completed"}])
    await api.sim(
        "PUT",
        "/_sim/faults",
        {
            "rules": [
                {"route": "job_status", "fault": "http_5xx", "status": 401, "max_hits": 2},
                {"route": "job_status", "fault": "http_5xx", "status": 403, "max_hits": 2},
            ]
        },
    )
    t = await api.track(kind="function_job", remote_id=rid)
    done = await api.wait_terminal(t["tracking_id"])
    assert done["outcome"] == "succeeded"
    statuses = [r["status"] for r in await api.requests_for(rid)]
    assert statuses[:4] == [401, 401, 403, 403]
    text = await api.metrics_text()
    line = 'orchestrator_polls_total{kind="function_job",result="unauthorized",workspace="default"}'
    assert float(text.split(line, 1)[1].split("\n", 1)[0]) == 4
