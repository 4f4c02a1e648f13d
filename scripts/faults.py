"""Link faults with three replicas on PostgreSQL, longer than CI's pass; by hand.

    .venv/bin/python scripts/faults.py [--scenario db-hang ...] [--fault-s 60] [--out faults.json]

Runs each scenario of ``tests/chaos/links.py`` (all by default: a hung or reset
database link, a replica cut from the workspace, the database 300 ms and 2 s
away, 5% packet loss on every link, a replica cut from the sink) on a
PostgreSQL cluster of its own (scripts/pg-cluster.sh, Debian's packages), each
in a fresh schema, with scripted jobs arriving throughout. Prints one Markdown
row per scenario (lost, duplicate and false terminals, close reads, the busiest
second against the limit, readiness, recovery), writes every figure as JSON,
and exits 1 if any scenario lost, duplicated or falsified a terminal. Packet
loss needs root and iptables (it adds, then removes, a chain of its own).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.chaos.links import SCENARIOS, Sizes, loss_tools, run_link_scenario, table
from tests.pgserver import CLUSTER, fresh_schema


async def run(args: argparse.Namespace, workdir: Path, dsn: str) -> list[dict[str, Any]]:
    rows = []
    for name in args.scenario or list(SCENARIOS):
        sc = SCENARIOS[name]
        if sc.mode == "loss" and (why := loss_tools()) is not None:
            print(f"{name}: skipped, {why}", flush=True)
            continue
        sizes = Sizes(
            before_s=args.before_s, fault_s=args.fault_s, after_s=args.after_s,
            rate=args.rate, limit=args.limit, settle_s=max(150.0, args.fault_s * 5),
        )  # fmt: skip
        directory = workdir / name
        directory.mkdir()
        async with fresh_schema(dsn) as schema:
            report, figures = await run_link_scenario(
                directory, schema, sc, sizes, lambda line: print(line, flush=True)
            )
        figures["failures"] = report.failures
        figures["examples"] = report.examples[:10]
        rows.append(figures)
        print(json.dumps(figures), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", choices=list(SCENARIOS))
    parser.add_argument("--before-s", type=float, default=20.0)
    parser.add_argument("--fault-s", type=float, default=60.0)
    parser.add_argument("--after-s", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=6.0, help="trackings a second")
    parser.add_argument("--limit", type=float, default=60.0, help="the workspace's limit")
    parser.add_argument("--out", default="faults.json", help="every figure, as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="faults-") as tmp:
        workdir = Path(tmp)
        workdir.chmod(0o755)  # the cluster's owner (postgres, under root) must reach it
        pg_dir = workdir / "pg"
        done = subprocess.run(
            ["bash", str(CLUSTER), "start", str(pg_dir)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            print(f"cannot start PostgreSQL: {done.stderr.strip()}", file=sys.stderr)
            return 2
        try:
            dsn = done.stdout.strip().splitlines()[-1]
            rows = asyncio.run(run(args, workdir, dsn))
        finally:
            subprocess.run(["bash", str(CLUSTER), "stop", str(pg_dir)], check=False)
    Path(args.out).write_text(json.dumps(rows, indent=2))
    print(table(rows))
    print(f"JSON: {args.out}")
    return 1 if any(r["failures"] or r["close_reads"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
