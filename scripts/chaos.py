"""The larger chaos run, started by hand.

    .venv/bin/python scripts/chaos.py --trackings 1000 --kills 20 [--seed 1] [--out chaos-report.json]

Same run as ``tests/chaos/test_chaos.py`` at a larger size: scripted jobs and
builds with known outcomes, every simulator fault kind on the status routes,
wire-format flips, a workspace nobody listens on, hostile intake, SIGKILLs of a
real ``orchestrator serve`` during intake, polling and delivery. Prints the
report as a table, writes it as JSON, exits 1 if any must-be-zero figure is not.

    .venv/bin/python scripts/chaos.py --replicas 3 --trackings 2000 --kills 120

The replicas mode (``tests/chaos/replicas.py``): N replicas on one PostgreSQL
cluster that the script starts from Debian's packages (scripts/pg-cluster.sh)
in the work directory, trackings arriving throughout, and ``--kills``
disruptions in a loop: SIGKILL of a replica (restarted under its id), SIGSTOP
of one (its leases run out, then SIGCONT), or a restart of PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.chaos.replicas import ReplicaChaosOptions, run_replica_chaos
from tests.chaos.run import ChaosOptions, run_chaos
from tests.pgserver import CLUSTER


async def run_replicas(args: argparse.Namespace, workdir: Path) -> int:
    """The replicas mode, on a cluster of its own in ``workdir/pg``."""
    workdir.chmod(0o755)  # the cluster's owner (postgres, under root) must reach it
    pg_dir = workdir / "pg"
    done = subprocess.run(
        ["bash", str(CLUSTER), "start", str(pg_dir)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        print(f"cannot start PostgreSQL: {done.stderr.strip()}", file=sys.stderr)
        return 2
    dsn = done.stdout.strip().splitlines()[-1]
    options = ReplicaChaosOptions(
        replicas=args.replicas,
        trackings=args.trackings,
        disruptions=args.kills,
        seed=args.seed,
        faults=not args.no_faults,
        settle_timeout_s=max(180.0, args.trackings * 0.2),
    )
    try:
        report, _ = await run_replica_chaos(
            workdir, dsn, pg_dir, options, lambda line: print(line, flush=True)
        )
    finally:
        subprocess.run(["bash", str(CLUSTER), "stop", str(pg_dir)], check=False)
    report.write(Path(args.out))
    print(report.table())
    print(f"JSON report: {args.out}; replica logs: {workdir}/r*/serve.log")
    return 1 if report.failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trackings", type=int, default=1000)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-faults", action="store_true", help="no simulator fault rules")
    parser.add_argument("--out", default="chaos-report.json", help="the JSON report")
    parser.add_argument("--workdir", help="keep the store and serve.log here (default: a temp dir)")
    parser.add_argument(
        "--replicas", type=int, default=0, help="N replicas on one PostgreSQL (the replicas mode)"
    )
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
        if args.replicas:
            return await run_replicas(args, workdir)
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
