"""The benchmark harness end to end at a tiny size: the report's shape, never its speed."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

POSITIVE = (
    "baseline_polls_per_s",
    "own_client_polls_per_s",
    "orchestrator_polls_per_s",
    "ratio_vs_aiohttp",
    "ratio_vs_own_client",
    "baseline_cpu_ms_per_poll",
    "own_client_cpu_ms_per_poll",
    "orchestrator_cpu_ms_per_poll",
    "cpu_ratio_vs_aiohttp",
    "cpu_ratio_vs_own_client",
    "half_polls_per_s",
    "half_caught_up_s",
    "lateness_p99_s",
    "intake_single_per_s",
    "intake_batch_per_s",
    "restart_to_ready_s",
    "saturation_ready_s",
    "saturation_first_reads_s",
    "saturation_writes_done_s",
    "restart_to_polling_s",
    "restart_peak_polls_per_s",
    "restart_new_first_read_s",
    "restart_target_s",
    "event_latency_p50_s",
    "event_latency_p99_s",
    "event_after_remote_terminal_p99_s",
    "polls_per_terminal",
    "polls_per_terminal_ideal_backoff",
    "polls_per_terminal_ideal_oracle",
    "adaptive_reads_per_terminal",
    "backoff_reads_per_terminal",
    "adaptive_delay_p50_s",
    "adaptive_delay_p95_s",
    "adaptive_delay_p99_s",
    "backoff_delay_p50_s",
    "backoff_delay_p95_s",
    "backoff_delay_p99_s",
    "simulator_cpu_share_baseline",
    "simulator_cpu_share_own_client",
    "simulator_cpu_share_orchestrator",
    "elapsed_s",
)
NON_NEGATIVE = (
    "lateness_p50_s",
    "next_run_at_extra_reads",
    "retry_after_reads_inside",
    "retry_after_workspace_reads_inside",
    "retry_after_windows_checked",
    "next_run_at_windows_checked",
    "events_duplicates",
)
# Two processes' RSS apart: at 300 trackings the allocator's noise is larger than
# the trackings' memory, so only its sign is free (the full profile has a target).
FINITE = ("rss_bytes_per_tracking",)


@pytest.mark.slow
def test_smoke_profile_writes_a_complete_report(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    # In a session of its own: a run cut off by the timeout takes its simulator and
    # services with it instead of leaving them polling.
    done = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / "run.py"), "--profile", "smoke", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        start_new_session=True,
    )
    try:
        stdout, stderr = done.communicate(timeout=110)
    except subprocess.TimeoutExpired:
        os.killpg(done.pid, signal.SIGKILL)
        done.communicate()
        raise
    assert done.returncode == 0, stderr[-3000:]
    assert "orchestrator at saturation" in stdout

    report = json.loads(out.read_text())
    for key in POSITIVE:
        value = report[key]
        assert isinstance(value, int | float) and math.isfinite(value) and value > 0, key
    for key in NON_NEGATIVE:
        value = report[key]
        assert isinstance(value, int | float) and math.isfinite(value) and value >= 0, key
    for key in FINITE:
        value = report[key]
        assert isinstance(value, int | float) and math.isfinite(value), key
    assert report["cpu_count"] >= 1
    # The two bare loops and the saturated service took turns, and polled in each.
    rounds = report["saturation_rounds"]
    assert len(rounds) == report["saturation_turns"] == report["parameters"]["turns"]
    for round_ in rounds:
        assert len(round_) == 6
        assert all(isinstance(v, int | float) and v > 0 for v in round_.values()), round_
    assert all(v > 0 for v in report["saturation_totals"].values())
    for side in ("baseline", "own_client", "orchestrator"):
        assert report[f"{side}_polls_own_count"] > 0
        assert report[f"{side}_polls_simulator_count"] > 0
    assert report["baseline_errors"] == report["own_client_errors"] == 0
    assert report["parameters"]["trackings"] == 300
    assert report["intake_accepted"] == 300
    assert report["restart_to_polling_s"] > 0 and "restart_to_polling_s" in report["targets"]
    assert report["events_received"] == report["events_expected"]
    assert report["events_duplicates"] == 0
    # The one-read-per-window figures are only worth their 0 if windows were seen.
    assert report["retry_after_windows_checked"] == 3
    assert report["next_run_at_windows_checked"] >= 1
    assert report["adaptive_exit_codes"] == {"adaptive": 0, "backoff": 0}
    assert {"adaptive_reads_per_terminal", "adaptive_delay_p95_s"} <= set(report["targets"])
    for key in ("intake_exit_code", "restart_exit_code", "half_exit_code", "events_exit_code"):
        assert report[key] == 0, key
    assert set(report["targets"]) >= {
        "ratio_vs_aiohttp",
        "cpu_ratio_vs_aiohttp",
        "restart_to_polling_s",
        "restart_new_first_read_s",
        "lateness_p99_s",
        "one_read_per_window",
    }
    assert all(isinstance(v, bool) for v in report["targets"].values())
