"""The larger chaos run, started by hand.

    .venv/bin/python scripts/chaos.py --trackings 1000 --kills 20 [--seed 1] [--out chaos-report.json]

Same run as ``tests/chaos/test_chaos.py`` at a larger size: scripted jobs and
builds with known outcomes, every simulator fault kind on the status routes,
wire-format flips, a workspace nobody listens on, hostile intake, SIGKILLs of a
real ``orchestrator serve`` during intake, polling and delivery. Prints the
report as a table, writes it as JSON, exits 1 if any must-be-zero figure is not.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.chaos.run import ChaosOptions, run_chaos


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trackings", type=int, default=1000)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-faults", action="store_true", help="no simulator fault rules")
    parser.add_argument("--out", default="chaos-report.json", help="the JSON report")
    parser.add_argument("--workdir", help="keep the store and serve.log here (default: a temp dir)")
    args = parser.parse_args()
    options = ChaosOptions(
        trackings=args.trackings,
        kills=args.kills,
        seed=args.seed,
        faults=not args.no_faults,
        down_trackings=max(4, args.trackings // 100),
        batch=max(5, args.trackings // 40),
        settle_timeout_s=max(120.0, args.trackings * 0.2),
    )

    async def run(workdir: Path) -> int:
        report, figures = await run_chaos(workdir, options, lambda line: print(line, flush=True))
        report.notes.append(f"unreachable workspace polls: {figures['down_polls']:.0f}")
        report.write(Path(args.out))
        print(report.table())
        print(f"JSON report: {args.out}; serve log: {workdir / 'serve.log'}")
        return 1 if report.failures else 0

    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
        return asyncio.run(run(Path(args.workdir)))
    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        return asyncio.run(run(Path(tmp)))


if __name__ == "__main__":
    sys.exit(main())
