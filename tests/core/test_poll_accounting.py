"""The polls a tracking reports add up to the reads the workspace received."""

from __future__ import annotations

import re

from tests.core.conftest import Api


async def test_polls_match_requests_and_metrics(api: Api) -> None:
    ids = []
    for i in range(3):
        rid = await api.script(
            "function_job",
            [
                {"after_s": 0, "status": "Queued"},
                {"after_s": 0.1 + i * 0.1, "status": "Leased"},
                {"after_s": 0.3 + i * 0.2, "status": "Completed"},
            ],
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
        float(v) for v in re.findall(r"^orchestrator_polls_total\{[^}]*\} (\S+)$", text, re.M)
    )
    assert counted == total_polls


async def test_active_counters_are_live_and_checkpointed_at_shutdown(api: Api) -> None:
    import asyncio

    from orchestrator.store.sqlite import SqliteStore

    rid = await api.script("function_job", [{"after_s": 0, "status": "Queued"}])
    t = await api.track(kind="function_job", remote_id=rid)
    async with asyncio.timeout(10):
        while True:
            _, now = await api.call("GET", f"/v1/trackings/{t['tracking_id']}")
            if now["polls"] >= 4:
                break
            await asyncio.sleep(0.05)
    assert now["state"] == "active" and now["last_polled_at"] and now["next_poll_at"]
    api.service.request_stop()
    running = [task for task in asyncio.all_tasks() if task.get_name() == "service-under-test"]
    assert await asyncio.wait_for(running[0], 10) == 0
    reads = [r for r in await api.requests_for(rid) if r["route"] == "job_status"]
    store = SqliteStore(api.service.settings.store.path)
    await store.open()
    try:
        stored = await store.get_tracking(t["tracking_id"])
    finally:
        await store.close()
    assert stored is not None and stored.state == "active"
    assert stored.polls == len(reads) >= now["polls"]
