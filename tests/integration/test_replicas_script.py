"""scripts/replicas.sh starts PostgreSQL, the simulator and N replicas, then stops them all."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.pgserver import REPO

pytestmark = pytest.mark.slow


def test_the_script_starts_two_ready_replicas_and_stops_everything(postgres_server: str) -> None:
    # postgres_server: the same requirement as every PostgreSQL test (binaries, or CI's).
    # Not under tmp_path: the cluster's owner (postgres, under root) must reach it.
    state = Path(tempfile.mkdtemp(prefix="orch-replicas-"))
    try:
        _run_script(state)
    finally:
        shutil.rmtree(state, ignore_errors=True)


def _run_script(state: Path) -> None:
    env = {**os.environ, "REPLICAS_ONCE": "1", "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "replicas.sh"), "2", str(state)],
        capture_output=True, text=True, timeout=180, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    answers = [json.loads(line.split(" ", 1)[1]) for line in done.stdout.splitlines()[:2]]
    assert [a["replica"] for a in answers] == ["replica-1", "replica-2"]
    assert all(a["status"] == "ready" for a in answers)
    # Everything it started is gone: the cluster's postmaster pid file went with it.
    assert not (state / "pg" / "data" / "postmaster.pid").exists()
