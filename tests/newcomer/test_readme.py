"""README.md's tour, run as written against a live ``serve --with-simulator``.

Every ``sh`` and ``python`` block runs, in order, unless an HTML comment
``<!-- not run by the README test: why -->`` stands right before it. Only the
ports change: the service and the simulator listen on free ones here, and
``.venv/bin/orchestrator`` is this interpreter's ``-m orchestrator``.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.newcomer.conftest import clean_env, free_port, wait_http

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
    port, sim_port = free_port(), free_port()
    cfg = tmp_path / "orchestrator.toml"
    cfg.write_text(
        f'[server]\nlisten = "127.0.0.1:{port}"\nshutdown_grace_s = 1\n'
        f'[store]\npath = "{tmp_path / "orch.db"}"\n'
        "[polling]\ninitial_delay_s = 0.2\nmax_delay_s = 1.0\n"
        '[logging]\nformat = "json"\nlevel = "WARNING"\n'
        f'[[workspaces]]\nname = "default"\nbase_url = "http://127.0.0.1:{sim_port}"\n'
    )
    log = tmp_path / "serve.log"
    with log.open("ab") as out:
        serve = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "serve", "--config", str(cfg),
             "--with-simulator"],
            stdout=out, stderr=subprocess.STDOUT, env=clean_env(),
        )  # fmt: skip
    try:
        wait_http(f"http://127.0.0.1:{port}/readyz", serve, log)
        outputs = []
        for runs, language, code in blocks():
            if not runs:
                continue
            code = re.sub(r"(localhost|127\.0\.0\.1):8080", f"127.0.0.1:{port}", code)
            code = re.sub(r"(localhost|127\.0\.0\.1):5080", f"127.0.0.1:{sim_port}", code)
            code = code.replace(".venv/bin/orchestrator", f"{sys.executable} -m orchestrator")
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
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(20)
