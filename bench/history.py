"""bench/runs.csv: one row per recorded run of the benchmark.

``python bench/run.py --record "NOTE"`` appends the run it made;
``python -m bench.history REPORT.json COMMIT "NOTE"`` appends a saved report.
"""

from __future__ import annotations

import csv
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

RUNS = Path(__file__).resolve().parent / "runs.csv"


def append(report: dict[str, Any], commit: str, note: str, path: Path = RUNS) -> None:
    with path.open(newline="") as f:
        columns = next(csv.reader(f))
    totals = report.get("saturation_totals") or {}
    turns = [r["baseline_polls_per_s"] for r in report.get("saturation_rounds") or []]
    known = {
        "commit": commit,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "method": "turns-medians",
        "note": note,
        # ratio and cpu_ratio have always been the service against the aiohttp loop.
        "ratio": report.get("ratio_vs_aiohttp"),
        "cpu_ratio": report.get("cpu_ratio_vs_aiohttp"),
        "ratio_totals": totals.get("ratio_vs_aiohttp"),
        "cpu_ratio_totals": totals.get("cpu_ratio_vs_aiohttp"),
        "baseline_turn_min_polls_per_s": min(turns, default=None),
        "baseline_turn_max_polls_per_s": max(turns, default=None),
    }
    row = []
    for column in columns:
        value = known.get(column, report.get(column))
        row.append("" if value is None else _cell(value))
    with path.open("a", newline="") as f:
        csv.writer(f, lineterminator="\n").writerow(row)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 10 else f"{value:.0f}"
    return str(value)


if __name__ == "__main__":
    report_path, commit, note = sys.argv[1], sys.argv[2], sys.argv[3]
    append(orjson.loads(Path(report_path).read_bytes()), commit, note)
