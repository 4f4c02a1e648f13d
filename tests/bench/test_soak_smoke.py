"""scripts/soak.py end to end at a tiny size, on SQLite and with two replicas on
PostgreSQL: it runs against today's simulator and every tracking it hands over
ends, once (its figures are read by hand, never here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.vocabulary import Outcome
from tests.pgserver import pg_binaries

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("replicas", [0, 2])
def test_soak_runs_and_every_tracking_ends(tmp_path: Path, replicas: int) -> None:
    if replicas and not pg_binaries():  # the soak starts a cluster of its own
        if os.environ.get("CI"):
            pytest.fail("no PostgreSQL server binaries (CI must run the replicas soak)")
        pytest.skip("no PostgreSQL server binaries: run scripts/install-postgresql.sh")
    out = tmp_path / "soak.json"
    args = ["--minutes", "0.1", "--rate", "10", "--drain-s", "60", "--out", str(out)]
    args += ["--replicas", str(replicas)]
    run = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "soak.py"), *args],
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["intake"] >= 30
    assert report["ended"] == report["intake"]
    assert report["never_ended"] == 0 and report["ended_twice"] == 0
    assert set(report["outcomes"]) <= set(Outcome)
    assert report["serve_exit_codes"] == [0] * max(1, replicas)
    assert report["samples"], "no sample of the service was taken"
