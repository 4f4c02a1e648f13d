"""The adaptive battery end to end at a tiny size: the report's shape, never its bars."""

from __future__ import annotations

import json
from pathlib import Path

from bench.adaptive_battery import CONFIGS, SHAPES, main


def test_the_battery_reports_every_shape_at_every_configuration(tmp_path: Path) -> None:
    out = tmp_path / "battery.json"
    main(["--scale", "0.1", "--wide-lazy-jobs", "60", "--out", str(out)])
    report = json.loads(out.read_text())
    assert set(report["shapes"]) == {f"{c}/{s}" for c in CONFIGS for s in SHAPES}
    for figures in report["shapes"].values():
        assert figures["oracle_reads"] >= 1.0 and figures["shape_oracle_reads"] >= 1.0
        assert figures["adaptive_reads"] >= 1.0 and figures["backoff_reads"] >= 1.0
        assert figures["adaptive_delay_p95_s"] >= figures["adaptive_delay_p50_s"] >= 0.0
    assert report["wide_lazy_steady"]["backoff_reads"] > 1.0
    assert report["wide_lazy_burst"]["backoff_reads"] > 1.0
