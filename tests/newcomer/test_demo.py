"""``orchestrator demo`` as a newcomer runs it: a child process, its summary, its clean-up."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.newcomer.conftest import clean_env


def test_demo_runs_to_a_clean_summary() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "demo", "--count", "50", "--seed", "11",
         "--no-live"],
        capture_output=True, text=True, timeout=110, env=clean_env(),
    )  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "trackings: 50 submitted, 50 reached an outcome" in out
    assert re.search(
        r"events: 51 delivered \(50 tracking, 1 group\), 51 verified, 0 bad signatures", out
    ), out
    # Every tracking joined the demo's group, which ended in one event.
    assert re.search(r"group demo: completed, 50/50 members ended \(.+\); one group event", out)
    assert re.search(r"scripted scenarios ended as planned: (\d+)/\1\b", out), out
    assert "polls per tracking: mean" in out
    for outcome in ("succeeded", "failed", "cancelled", "deadline_exceeded", "not_found"):
        assert outcome in out
    assert "ReasonCodes: " in out
    # The cancel line says why it differs from the cancelled outcomes.
    assert re.search(r"cancels through the orchestrator: \d+ asked, \d+ accepted \(202\); "
                     r"\d+ more ended cancelled by the workspace", out), out  # fmt: skip
    # Summary lines are never cut mid-phrase (they once broke before "webhook-id").
    summary = out[out.index("trackings: 50 submitted") :].splitlines()
    starts = ("trackings:", "events:", "group demo:", "polls per", "transport", "contract", "build", "cancels",
              "scripted", "time:", "not as planned", "  ")  # fmt: skip
    assert all(line.startswith(starts) or not line for line in summary), summary


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_demo_stops_everything_it_started_on_a_signal(sig: signal.Signals, code: int) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "demo", "--count", "300", "--no-live"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env(),
    )  # fmt: skip
    assert proc.stdout is not None
    seen: list[str] = []
    port = None
    try:
        deadline = time.monotonic() + 60
        for line in proc.stdout:
            seen.append(line)
            found = re.search(r"orchestrator serve on http://127\.0\.0\.1:(\d+)", line)
            if found:
                port = int(found.group(1))
            if "waiting for every outcome" in line or time.monotonic() > deadline:
                break
        assert port is not None and _port_open(port), "".join(seen)
        proc.send_signal(sig)
        rest, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, "".join(seen) + rest
    assert "every process it started has been stopped" in rest
    assert not _port_open(port)


def test_a_seed_repeats_the_whole_mix_builds_included() -> None:
    """Two demos with one seed end with the same outcomes, kind by kind, and the
    same build ReasonCodes (the builds' outcomes once varied run to run)."""

    def outcomes() -> list[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "orchestrator", "demo", "--count", "80", "--seed", "5",
             "--no-live"],
            capture_output=True, text=True, timeout=110, env=clean_env(),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        lines = proc.stdout.splitlines()
        table = [
            line for line in lines if ("│" in line and "_build" in line) or "function_job" in line
        ]
        codes = [line for line in lines if "ReasonCodes" in line]
        assert len(table) == 3 and codes, proc.stdout
        return table + codes

    assert outcomes() == outcomes()


def test_plain_progress_lines_break_between_phrases_within_the_width() -> None:
    import io
    from collections import Counter

    from rich.console import Console

    from orchestrator.demo.plan import Planned
    from orchestrator.demo.progress import Display, SinkStats, Tally

    planned = {f"trk_{i}": Planned("x", "function_job", {}) for i in range(300)}
    tally = Tally(planned)
    tally.outcomes = {
        "function_job": Counter(
            succeeded=212, failed=44, cancelled=20, deadline_exceeded=16, not_found=8
        )
    }
    tally.ended = set(list(planned)[:300])
    tally.polls_by_result = Counter(ok=123456)
    out = io.StringIO()
    Display(Console(file=out, width=100), 300, live=False).plain(
        tally, SinkStats(), 3.3, force=True
    )
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and all(len(line) <= 100 for line in lines), lines
    # Each line holds whole phrases: the second goes on with one, under the first.
    assert lines[0].startswith("[  3.3s] 300/300 ended · succeeded 212 failed 44")
    assert lines[1].strip().startswith(("events delivered", "polls"))
    assert "polls 123456" in out.getvalue()
