"""Benchmark the orchestrator against bare polling loops, side by side, on loopback.

    python bench/run.py --profile quick --out report.json

Profiles: ``smoke`` (300 trackings, seconds, for the test suite), ``quick``
(10,000, under a minute), ``full`` (100,000, a few minutes), ``replicas``
(1, 2 and 3 replicas on a PostgreSQL cluster it starts, against SQLite: see
bench/replicas_phase.py; not run in CI), ``million`` (1,000,000 trackings taken in,
settled, stopped and started again: bench/million_phase.py; not run in CI). Every process is
real: the simulator, the two bare loops and each ``orchestrator serve`` run in
their own processes; the sink runs in this one. docs/performance.md says how
each figure is measured; bench/runs.csv holds the recorded runs, one row each.
"""

from __future__ import annotations

import argparse
import compileall
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp
import orjson
import uvloop

from bench import history
from bench.adaptive_phase import adaptive
from bench.events_phase import events
from bench.million_phase import million_profile, million_table, million_targets
from bench.phases import PROFILES, Params, bulk_jobs, throughput
from bench.procs import REPO, Simulator, kill_spawned
from bench.replicas_phase import replicas_profile, replicas_table

# (figure, comparison, bound): a number, or the report key of a bound made in the run.
TARGETS: list[tuple[str, str, str]] = [
    ("ratio_vs_aiohttp", ">=", "1.2"),
    ("cpu_ratio_vs_aiohttp", "<=", "0.8"),
    ("lateness_p99_s", "<=", "0.5"),
    ("rss_bytes_per_tracking", "<=", "2048"),
    ("intake_batch_per_s", ">=", "10000"),
    ("intake_single_per_s", ">=", "1500"),
    ("restart_to_polling_s", "<=", "restart_target_s"),
    ("restart_new_first_read_s", "<=", "restart_new_first_read_target_s"),
    ("event_latency_p99_s", "<=", "event_latency_target_s"),
]


async def bench(p: Params, workdir: Path) -> dict[str, Any]:
    started = time.monotonic()
    report: dict[str, Any] = {
        "profile": p.name,
        "cpu_count": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "python": platform.python_version(),
        "parameters": {k: getattr(p, k) for k in p.__slots__},
    }
    sim = Simulator(workdir)
    connector = aiohttp.TCPConnector(limit=64)
    async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:
        await sim.start(session)
        try:
            phases: dict[str, float] = {}
            mark = time.monotonic()
            extra = p.small if p.name == "million" else 0
            ids = await bulk_jobs(session, sim.url, p.trackings + extra)
            phases["setup"], mark = time.monotonic() - mark, time.monotonic()
            if p.name in ("replicas", "million"):
                profile = replicas_profile if p.name == "replicas" else million_profile
                report.update(await profile(session, sim, ids, p, workdir))
                report["elapsed_s"] = time.monotonic() - started
                if p.name == "million":
                    report["targets"] = million_targets(report)
                return report
            report.update(await throughput(session, sim, ids, p, workdir))
            phases["orchestrator"], mark = time.monotonic() - mark, time.monotonic()
            report.update(await events(session, sim, p, workdir))
            phases["events"], mark = time.monotonic() - mark, time.monotonic()
            report.update(await adaptive(session, sim, p, workdir))
            phases["adaptive"] = time.monotonic() - mark
            report["phase_seconds"] = phases
        finally:
            sim.stop()
            kill_spawned()
    report["event_latency_target_s"] = 0.25 + report["events_policy"]["max_delay_s"]
    # Every tracking owed a read at the pace of the rate limit or of the bare aiohttp
    # loop, whichever is slower, with 30% slack and 3 s to start.
    pace = min(p.restart_rate, report["baseline_polls_per_s"])
    report["restart_target_s"] = 1.3 * (p.trackings / pace) + 3.0
    report["restart_new_first_read_target_s"] = report["restart_initial_delay_s"] + 1.0
    report["loadavg_end"] = os.getloadavg()
    report["elapsed_s"] = time.monotonic() - started
    report["targets"] = _targets(report)
    return report


def _targets(r: dict[str, Any]) -> dict[str, bool]:
    out = {}
    for key, op, bound_text in TARGETS:
        bound = float(r[bound_text]) if bound_text.endswith("_target_s") else float(bound_text)
        value = float(r[key])
        out[key] = value >= bound if op == ">=" else value <= bound
    out["restart_within_rate_limit"] = (
        r["restart_peak_polls_per_s"] <= 1.05 * r["restart_rate_limit"]
    )
    out["adaptive_reads_per_terminal"] = r["adaptive_reads_per_terminal"] <= 2.0
    out["adaptive_delay_p95_s"] = r["adaptive_delay_p95_s"] <= r["backoff_delay_p95_s"]
    out["one_read_per_window"] = (
        r["next_run_at_extra_reads"] == 0 and r["retry_after_reads_inside"] == 0
    )
    return out


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:,.4f}" if abs(value) < 10 else f"{value:,.0f}"
    return str(value)


def table(r: dict[str, Any]) -> str:
    rows = [
        ("baseline_polls_per_s", "bare aiohttp loop, polls/s (median turn)"),
        ("baseline_turns_spread", "  slowest / fastest of its turns, polls/s"),
        ("own_client_polls_per_s", "bare pyreqwest loop, polls/s (median turn)"),
        ("saturation_ready_s", "saturated service: start to ready, s"),
        ("saturation_first_reads_s", "  start to every tracking read once, s"),
        ("saturation_writes_done_s", "  start to every first body stored, s"),
        ("orchestrator_polls_per_s", "orchestrator at saturation, polls/s (median turn)"),
        ("ratio_vs_aiohttp", "polls/s ratio to the aiohttp loop (>= 1.2)"),
        ("ratio_vs_aiohttp_totals", "  over all turns' totals"),
        ("ratio_vs_own_client", "polls/s ratio to the pyreqwest loop"),
        ("baseline_cpu_ms_per_poll", "aiohttp loop CPU ms/poll"),
        ("own_client_cpu_ms_per_poll", "pyreqwest loop CPU ms/poll"),
        ("orchestrator_cpu_ms_per_poll", "orchestrator CPU ms/poll"),
        ("cpu_ratio_vs_aiohttp", "CPU ratio to the aiohttp loop (<= 0.8)"),
        ("cpu_ratio_vs_aiohttp_totals", "  over all turns' totals"),
        ("cpu_ratio_vs_own_client", "CPU ratio to the pyreqwest loop"),
        ("simulator_cpu_share_baseline", "simulator CPU share (aiohttp loop)"),
        ("simulator_cpu_share_orchestrator", "simulator CPU share (orchestrator)"),
        ("half_caught_up_s", "half saturation: ready to caught up, s"),
        ("half_polls_per_s", "half saturation, polls/s"),
        ("lateness_p50_s", "lateness p50 at half saturation, s"),
        ("lateness_p99_s", "lateness p99 at half saturation, s (<= 0.5)"),
        ("rss_bytes_per_tracking", "RSS bytes per active tracking (<= 2048)"),
        ("intake_single_per_s", "intake, single, trackings/s (>= 1500)"),
        ("intake_batch_per_s", "intake, batch, trackings/s (>= 10000)"),
        ("restart_to_ready_s", "restart to ready, s"),
        ("restart_to_polling_s", "restart to all polled once, s"),
        ("restart_target_s", "  target: 1.3 x trackings / min(limit, aiohttp) + 3"),
        ("restart_new_first_read_s", "  a tracking posted meanwhile: first read after, s"),
        ("restart_new_first_read_target_s", "  its target: initial delay + 1, s"),
        ("restart_peak_polls_per_s", "restart peak polls/s (limit below)"),
        ("restart_rate_limit", "workspace rate limit during restart"),
        ("event_latency_p50_s", "event latency p50 (served -> sink), s"),
        ("event_latency_p99_s", "event latency p99 (served -> sink), s"),
        ("event_after_remote_terminal_p99_s", "remote terminal -> sink p99, s"),
        ("polls_per_terminal", "polls per terminal (mix)"),
        ("polls_per_terminal_ideal_backoff", "ideal, same backoff, no jitter"),
        ("adaptive_reads_per_terminal", "adaptive: reads per terminal (<= 2.0)"),
        ("backoff_reads_per_terminal", "backoff: reads per terminal, same jobs"),
        ("adaptive_delay_p50_s", "adaptive: remote terminal -> sink p50, s"),
        ("backoff_delay_p50_s", "backoff: remote terminal -> sink p50, s"),
        ("adaptive_delay_p95_s", "adaptive: p95, s (<= backoff's)"),
        ("backoff_delay_p95_s", "backoff: p95, s"),
        ("adaptive_delay_p99_s", "adaptive: p99, s"),
        ("backoff_delay_p99_s", "backoff: p99, s"),
        ("adaptive_late_reads_per_terminal", "adaptive, second half: reads per terminal"),
        ("backoff_late_reads_per_terminal", "backoff, second half: reads per terminal"),
        ("next_run_at_extra_reads", "extra reads inside NextRunAt windows"),
        ("retry_after_reads_inside", "reads of a 429'd tracking in its window"),
        ("retry_after_workspace_reads_inside", "other reads arriving in the window"),
        ("retry_after_workspace_reads_inside_latest_s", "latest such arrival after the 429, s"),
        ("cpu_count", "cores"),
        ("elapsed_s", "benchmark wall time, s"),
    ]
    width = max(len(label) for _, label in rows)
    load = "/".join(f"{x:.2f}" for x in r["loadavg_start"])
    lines = [
        f"profile {r['profile']}: {r['parameters']['trackings']:,} trackings,"
        f" {r['cpu_count']} cores, load average at start {load}"
    ]
    rounds = r.get("saturation_rounds") or [{"baseline_polls_per_s": float("nan")}]
    turns = [round_["baseline_polls_per_s"] for round_ in rounds]
    totals = r.get("saturation_totals", {})
    derived = {
        "baseline_turns_spread": f"{min(turns):,.0f} / {max(turns):,.0f}",
        "ratio_vs_aiohttp_totals": totals.get("ratio_vs_aiohttp"),
        "cpu_ratio_vs_aiohttp_totals": totals.get("cpu_ratio_vs_aiohttp"),
    }
    for key, label in rows:
        lines.append(f"  {label:<{width}}  {_fmt(derived.get(key, r.get(key)))}")
    met = ", ".join(f"{k}={'met' if v else 'NOT met'}" for k, v in r["targets"].items())
    lines.append(f"  targets: {met}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    parser.add_argument("--out", type=Path, default=None, help="write the report (JSON) here")
    parser.add_argument("--workdir", type=Path, default=None, help="keep databases and logs here")
    parser.add_argument(
        "--record", metavar="NOTE", help="append the run to bench/runs.csv with this note"
    )
    args = parser.parse_args(argv)
    # Compiled once, as an install would: under PYTHONDONTWRITEBYTECODE every process
    # start would compile the checkout again, and the restart figure would time that.
    compileall.compile_dir(REPO / "orchestrator", quiet=1)
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        report = uvloop.run(bench(PROFILES[args.profile], workdir))
    if args.out is not None:
        args.out.write_bytes(
            orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
        )
    tables = {"replicas": replicas_table, "million": million_table}
    print(tables.get(args.profile, table)(report))
    if args.record is not None:
        commit = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        history.append(report, commit or "unknown", args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
