"""README.md's tour, run as written against a live ``serve --with-simulator``.

Every ``sh`` and ``python`` block runs, in order, unless an HTML comment
``<!-- not run by the README test: why -->`` stands right before it. Only the
ports change: the service and the simulator listen on free ones here, and
``.venv/bin/orchestrator`` is this interpreter's ``-m orchestrator``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    with serve_with_simulator(tmp_path) as (port, sim_port):
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
    tour, cli, python = outputs
    assert '"outcome":"succeeded"' in tour and '"type":"com.moltaro' in tour
    assert "orchestrator_trackings_terminal_total{" in tour and " 0.0\n" not in tour
    assert "ended as succeeded" in cli and "Active trackings" in cli
    assert python.startswith("succeeded ")
