"""scripts/soak.py end to end at a tiny size: it runs against today's simulator and
every tracking it hands over ends (its figures are read by hand, never here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.vocabulary import Outcome

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_soak_runs_and_every_tracking_ends(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    args = ["--minutes", "0.1", "--rate", "10", "--drain-s", "60", "--out", str(out)]
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
    assert report["never_ended"] == 0
    assert set(report["outcomes"]) <= set(Outcome)
    assert report["serve_exit_code"] == 0
    assert report["samples"], "no sample of the service was taken"
