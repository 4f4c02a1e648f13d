"""The polls a tracking reports add up to the reads the workspace received."""

from __future__ import annotations

import re

from tests.core.conftest import Api


async def test_polls_match_requests_and_metrics(api: Api) -> None:
    ids = []
    for i in range(3):
        rid = await api.script(
            "function_job",
            [{"after_s": 0, "status": "Queued"}, {"after_s": 0.1 + i * 0.1, "status": "Leased"},
             {"after_s": 0.3 + i * 0.2, "status": "Completed"}],
        )
        ids.append(rid)
    done = []
    for rid in ids:
        t = await api.track(kind="function_job", remote_id=rid)
        done.append(t["tracking_id"])
    total_polls = 0
    for rid, tid in zip(ids, done, strict=True):
        final = await api.wait_terminal(tid)
        reads = [r for r in await api.requests_for(rid) if r["route"] == "job_status"]
        assert final["polls"] == len(reads), (final["polls"], len(reads))
        total_polls += final["polls"]
        _, feed = await api.call("GET", "/v1/events?after=0")
        event = next(e for e in feed["events"] if e["subject"] == tid)
        assert event["data"]["polls"] == final["polls"]
    text = await api.metrics_text()
    counted = sum(
        float(v) for v in re.findall(r'^orchestrator_polls_total\{[^}]*\} (\S+)$', text, re.M)
    )
    assert counted == total_polls
