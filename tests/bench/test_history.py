"""bench/runs.csv rows as bench.history appends them."""

from __future__ import annotations

import csv
from pathlib import Path

from bench.history import append


def test_a_run_is_one_row_under_the_header_with_the_files_line_ending(tmp_path: Path) -> None:
    runs = tmp_path / "runs.csv"
    runs.write_text("commit,date,profile,method,note,ratio,ratio_totals\n")
    # The ratio columns hold the service against the aiohttp loop.
    report = {
        "profile": "full",
        "ratio_vs_aiohttp": 0.81,
        "saturation_totals": {"ratio_vs_aiohttp": 0.79},
    }
    append(report, "abc1234", "a note, with a comma", runs)
    raw = runs.read_bytes()
    assert b"\r" not in raw and raw.endswith(b"\n")
    with runs.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1
    row = rows[0]
    assert (row["commit"], row["profile"], row["method"]) == ("abc1234", "full", "turns-medians")
    assert (row["note"], row["ratio"], row["ratio_totals"]) == (
        "a note, with a comma",
        "0.81",
        "0.79",
    )
