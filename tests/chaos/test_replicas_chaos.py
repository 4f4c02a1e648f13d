"""A small replicas chaos run (scripts/chaos.py --replicas runs the large one by hand):
three replicas on one PostgreSQL, kills, stops and a database restart while
trackings arrive; nothing lost, no false or duplicate terminal, no job read by
two replicas at once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.chaos.replicas import ReplicaChaosOptions, run_replica_chaos
from tests.pgserver import DIR_ENV

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
async def test_replicas_survive_kills_stops_and_a_database_restart(
    tmp_path: Path, postgres_dsn: str, postgres_server: str
) -> None:
    directory = os.environ.get(DIR_ENV)
    if directory is None:
        reason = f"{DIR_ENV} is not set: cannot restart the server"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    options = ReplicaChaosOptions(trackings=120, disruptions=8, seed=5)
    report, figures = await run_replica_chaos(
        tmp_path, postgres_dsn, Path(directory), options, print
    )
    report.write(tmp_path / "chaos-report.json")
    print(report.table())
    assert not report.failures, report.table()
    assert report.trackings == 120 and sum(report.terminal_by_outcome.values()) == 120
    assert report.kills_survived == 8
    assert figures["disruptions"] == {
        "database restarts": 2,
        "replica SIGSTOPs": 2,
        "replica SIGKILLs": 4,
    }
    assert report.faults_injected.get("http_500", 0) > 0, report.faults_injected
    assert figures["close_reads"] == 0, report.examples
    assert figures["feeds_differ"] == 0
