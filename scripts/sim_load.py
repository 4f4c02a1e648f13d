"""Load the simulator's status routes from separate processes and report reads per second.

    python scripts/sim_load.py --spawn --duration 10 --concurrency 64 --processes 1
    python scripts/sim_load.py --url http://127.0.0.1:5080 --duration 10

With ``--spawn`` a simulator (``bench`` profile unless --profile says otherwise)
is started in its own process on a free loopback port and stopped afterwards.
Jobs and builds are created first, then every client loops GET on their status
routes until the duration or the request budget runs out. Bounded in time and
count; loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
from typing import Any
from urllib.parse import urlsplit

import aiohttp

JOBS = "/api/workspace/functions/jobs/"
BUILDS = (
    "/api/workspace/admin/net-operation-project/builds",
    "/api/workspace/admin/ui-project/builds",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(profile: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    code = f"from orchestrator.simulator import run_simulator; run_simulator('127.0.0.1:{port}', {profile!r})"
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the simulator did not come up")


async def prepare(url: str, jobs: int, builds: int) -> list[str]:
    paths: list[str] = []
    async with aiohttp.ClientSession(base_url=url) as client:
        for n in range(jobs):
            async with client.post(
                f"/api/workspace/functions/load.job-{n % 10}/enqueue", json={}
            ) as r:
                paths.append(JOBS + (await r.json())["Data"]["JobId"])
        for n in range(builds):
            base = BUILDS[n % 2]
            async with client.post(base, json={"Kind": "Build"}) as r:
                paths.append(f"{base}/{(await r.json())['Id']}")
    return paths


async def _client_loop(
    session: aiohttp.ClientSession, paths: list[str], stop_at: float, budget: list[int],
    counts: dict[int, int], latencies: list[float], rng: random.Random,
) -> None:  # fmt: skip
    while budget[0] > 0 and time.monotonic() < stop_at:
        budget[0] -= 1
        started = time.perf_counter()
        try:
            async with session.get(rng.choice(paths)) as response:
                await response.read()
                status = response.status
        except aiohttp.ClientError:
            status = 0
        if len(latencies) < 200_000:
            latencies.append(time.perf_counter() - started)
        counts[status] = counts.get(status, 0) + 1


async def load(url: str, paths: list[str], concurrency: int, duration: float, max_requests: int, seed: int) -> dict[str, Any]:  # fmt: skip
    counts: dict[int, int] = {}
    latencies: list[float] = []
    budget = [max_requests]
    rng = random.Random(seed)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(base_url=url, connector=connector) as session:
        started = time.monotonic()
        stop_at = started + duration
        await asyncio.gather(
            *(
                _client_loop(session, paths, stop_at, budget, counts, latencies, rng)
                for _ in range(concurrency)
            )
        )
        elapsed = time.monotonic() - started
    return {"counts": counts, "elapsed": elapsed, "latencies": latencies}


def _worker(args: tuple[str, list[str], int, float, int, int]) -> dict[str, Any]:
    try:
        import uvloop

        return uvloop.run(load(*args))
    except ImportError:
        return asyncio.run(load(*args))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--url", help="a running simulator (loopback only)")
    target.add_argument("--spawn", action="store_true", help="start a simulator in a subprocess")
    parser.add_argument("--profile", default="bench")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--builds", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=64, help="clients per process")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--max-requests", type=int, default=2_000_000, help="per process")
    opts = parser.parse_args()
    if (
        not 0 < opts.duration <= 300
        or not 1 <= opts.concurrency <= 1024
        or not 1 <= opts.processes <= 16
    ):
        parser.error("duration 0-300 s, concurrency 1-1024, processes 1-16")
    proc = None
    if opts.spawn:
        proc, url = spawn(opts.profile)
    else:
        url = opts.url.rstrip("/")
        if urlsplit(url).hostname not in ("127.0.0.1", "localhost", "::1"):
            parser.error("--url must be a loopback address")
    try:
        paths = asyncio.run(prepare(url, opts.jobs, opts.builds))
        jobs = [
            (url, paths, opts.concurrency, opts.duration, opts.max_requests, n)
            for n in range(opts.processes)
        ]
        with multiprocessing.get_context("spawn").Pool(opts.processes) as pool:
            results = pool.map(_worker, jobs)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=15)
    counts: dict[int, int] = {}
    for r in results:
        for status, n in r["counts"].items():
            counts[status] = counts.get(status, 0) + n
    total = sum(counts.values())
    elapsed = max(r["elapsed"] for r in results)
    lat = sorted(x for r in results for x in r["latencies"])
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000 if lat else float("nan")  # noqa: E731
    print(
        f"cpus={os.cpu_count()} processes={opts.processes} concurrency/process={opts.concurrency} resources={len(paths)}"
    )
    print(f"requests={total} in {elapsed:.2f}s -> {total / elapsed:,.0f} status reads/s")
    print(f"statuses={dict(sorted(counts.items()))}")
    print(
        f"latency ms: p50={p(0.5):.2f} p99={p(0.99):.2f} mean={statistics.fmean(lat) * 1000 if lat else 0:.2f}"
    )


if __name__ == "__main__":
    main()
