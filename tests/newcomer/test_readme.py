"""README.md's tour, run as written against a live ``serve --with-simulator``.

Every ``sh`` and ``python`` block runs, in order, unless an HTML comment
``<!-- not run by the README test: why -->`` stands right before it. Only the
ports change: the service and the simulator listen on free ones here, and
``.venv/bin/orchestrator`` is this interpreter's ``-m orchestrator``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from tests.newcomer.conftest import clean_env, for_ports, serve_with_simulator

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"(<!-- not run[^\n]*-->\n)?```(sh|python)\n(.*?)```", re.S)


def blocks() -> list[tuple[bool, str, str]]:
    """(runs, language, code) for each sh or python block, in order."""
    return [
        (m.group(1) is None, m.group(2), m.group(3)) for m in BLOCK.finditer(README.read_text())
    ]


def test_the_readme_blocks_are_found_and_the_set_up_ones_are_marked() -> None:
    found = blocks()
    assert sum(1 for runs, _, _ in found if runs) >= 3
    set_up = [code for runs, _, code in found if "pip install" in code]
    assert len(set_up) == 2 and all(not runs for runs, _, c in found if "pip install" in c)


def promised_outcomes() -> set[str]:
    """The outcomes README.md tells a reader to expect of the tour's jobs."""
    return set(re.findall(r'`"outcome":"(\w+)"`', README.read_text()))


def run_tour(tmp_path: Path, profile: dict[str, Any] | None = None) -> tuple[str, str, str, str]:
    """The tour's runnable blocks against a live service: (curl, CLI, Python, cancel) output.

    ``profile``: a job behaviour put on the simulator first (its control API), else
    the embedded defaults throughout."""
    with serve_with_simulator(tmp_path) as (port, sim_port):
        if profile is not None:
            put = urllib.request.Request(
                f"http://127.0.0.1:{sim_port}/_sim/profile",
                data=json.dumps({"job": profile}).encode(),
                headers={"Content-Type": "application/json"},
                method="PUT",
            )
            with urllib.request.urlopen(put, timeout=10) as resp:
                assert resp.status == 200
        outputs = []
        for runs, language, code in blocks():
            if not runs:
                continue
            code = for_ports(code, port, sim_port)
            command = ["bash", "-euo", "pipefail", "-c", code]
            if language == "python":
                command = [sys.executable, "-c", code]
            env = clean_env(ORCH_SERVER=f"http://127.0.0.1:{port}", COLUMNS="160")
            done = subprocess.run(
                command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90
            )
            assert done.returncode == 0, (code, done.stdout, done.stderr)
            outputs.append(done.stdout)
    tour, cli, python, cancel = outputs
    return tour, cli, python, cancel


def check_as_promised(tour: str, cli: str, python: str, cancel: str) -> set[str]:
    """Each block's output has the shape README.md gives for the outcome it shows;
    answers the outcomes seen."""
    promised = promised_outcomes()
    [outcome] = set(re.findall(r'"outcome":"(\w+)"', tour))  # the tracking and its event
    assert outcome in promised, (outcome, promised)
    assert f'"type":"com.moltaro.orchestrator.tracking.{outcome}"' in tour
    assert f'orchestrator_trackings_terminal_total{{kind="function_job",outcome="{outcome}"' in tour
    assert " 0.0\n" not in tour
    if outcome == "succeeded":
        assert '"result_summary":"' in tour
    else:
        assert '"last_error":"' in tour and '"attempts":[{' in tour

    said = re.search(r" ended as (\w+) after \d+ polls(: .+)?\n", cli)
    assert said and said.group(1) in promised, cli
    assert "Active trackings" in cli
    if said.group(1) == "succeeded":
        assert "exit code" not in cli
    else:
        assert said.group(2) and "\nexit code 1\n" in cli, cli

    first, _, result = python.partition(" ")
    assert first in promised and result.startswith("{"), python
    if first == "failed":
        assert "'last_error': '" in result

    # The job kept Queued is cancelled as the README says; each JSON ends its line.
    accepted, ended = cancel.splitlines()
    assert json.loads(accepted)["remote_status"] == "Queued", cancel
    assert json.loads(ended)["outcome"] == "cancelled", cancel
    assert tour.endswith("\n") and "}{" not in tour
    return {outcome, said.group(1), first}


def test_the_readme_promises_both_outcomes_of_a_simulated_job() -> None:
    assert promised_outcomes() == {"succeeded", "failed"}


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    # On the embedded defaults a job fails all three attempts about one time in
    # 450: either outcome is one the README shows.
    check_as_promised(*run_tour(tmp_path))


def test_the_readme_tour_shows_what_the_readme_says_of_a_job_that_fails_every_attempt(
    tmp_path: Path,
) -> None:
    # The rare branch, made certain (and quick) through the simulator's control API.
    failing = {"sequence": ["failed"], "pickup_s": 0.1, "duration_s": 0.2, "retry_delay_s": 0.2}
    assert check_as_promised(*run_tour(tmp_path, failing)) == {"failed"}


def test_the_tour_run_twice_waits_for_its_own_tracking_each_time(tmp_path: Path) -> None:
    # The wait loop once matched any terminal tracking: a second run returned at once.
    [(_, _, tour)] = [b for b in blocks() if b[0] and b[1] == "sh"][:1]
    with serve_with_simulator(tmp_path) as (port, sim_port):
        for _ in range(2):
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", for_ports(tour, port, sim_port)],
                cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=90,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            created, ended = (json.loads(line) for line in done.stdout.splitlines()[:2])
            assert ended["tracking_id"] == created["tracking_id"]
            assert ended["state"] == "terminal", ended
