"""The baseline: a bare aiohttp polling loop, the most polls per second this stack can do.

Same event loop (uvloop), same connector and request settings as the service's
``WorkspaceClient`` (one ``TCPConnector(limit=concurrency + 8)``, ``Accept``
header, per-request timeout, no redirects, pre-quoted URL), same JSON parsing
(orjson of the whole body); no scheduling, no interpretation, no store, no
metrics. ``concurrency`` workers each loop over their share of the ids.

    python bench/baseline.py --url URL --ids-file FILE --concurrency 64 --warmup 1 --duration 5

Prints one JSON object: polls, cpu_s and wall_s over the measured window.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import aiohttp
import orjson
import uvloop
from yarl import URL

PATH = "/api/workspace/functions/jobs/"


async def run(
    url: str, ids: list[str], concurrency: int, warmup: float, duration: float
) -> dict[str, float]:
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=concurrency + 8, ttl_dns_cache=300), trust_env=False
    )
    headers = {"Accept": "application/json"}
    timeout = aiohttp.ClientTimeout(total=10)
    counting = False
    polls = 0
    errors = 0
    stop = False

    async def worker(mine: list[str]) -> None:
        nonlocal polls, errors
        while not stop:
            for rid in mine:
                if stop:
                    return
                async with session.request(
                    "GET",
                    URL(url + PATH + rid, encoded=True),
                    headers=headers,
                    timeout=timeout,
                    allow_redirects=False,
                ) as resp:
                    raw = await resp.read()
                    status = resp.status
                if status == 200:
                    orjson.loads(raw)
                else:
                    errors += 1
                if counting:
                    polls += 1

    tasks = [asyncio.create_task(worker(ids[i::concurrency])) for i in range(concurrency)]
    await asyncio.sleep(warmup)
    counting = True
    cpu0, wall0 = time.process_time(), time.monotonic()
    await asyncio.sleep(duration)
    counting = False
    cpu, wall, done = time.process_time() - cpu0, time.monotonic() - wall0, polls
    stop = True
    await asyncio.gather(*tasks, return_exceptions=True)
    await session.close()
    return {"polls": done, "cpu_s": cpu, "wall_s": wall, "errors": errors}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--ids-file", required=True)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--duration", type=float, default=5.0)
    args = parser.parse_args()
    with open(args.ids_file) as f:
        ids = [line.strip() for line in f if line.strip()]
    result = uvloop.run(run(args.url, ids, args.concurrency, args.warmup, args.duration))
    sys.stdout.write(orjson.dumps(result).decode() + "\n")


if __name__ == "__main__":
    main()
