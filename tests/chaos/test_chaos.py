"""A CI-sized chaos run: platform faults and SIGKILLs at random moments, checked against truth."""

from __future__ import annotations

from pathlib import Path

from tests.chaos.run import ChaosOptions, run_chaos


async def test_faults_and_kills_lose_nothing_and_report_each_terminal_once(
    tmp_path: Path,
) -> None:
    report, _ = await run_chaos(tmp_path, ChaosOptions(trackings=90, kills=6, seed=11), print)
    report.write(tmp_path / "chaos-report.json")
    print(report.table())
    assert not report.failures, report.table()
    assert report.kills_survived == 6
    assert report.trackings == 94
    assert sum(report.terminal_by_outcome.values()) == 94
    injected = report.faults_injected
    for kind in (
        "latency",
        "http_500",
        "http_502",
        "rate_limited",
        "unavailable",
        "reset",
        "malformed",
    ):
        assert injected.get(kind, 0) > 0, injected
    assert report.hostile_inputs_tried > 100
