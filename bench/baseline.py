"""The baseline: a bare aiohttp polling loop, the most polls per second this stack can do.

Same event loop (uvloop), same connector and request settings as the service's
``WorkspaceClient`` (one ``TCPConnector(limit=concurrency + 8)``, ``Accept``
header, per-request timeout, no redirects, pre-quoted URL), same JSON parsing
(orjson of the whole body); no scheduling, no interpretation, no store, no
metrics. ``concurrency`` workers each loop over their share of the ids.

    python bench/baseline.py --url URL --ids-file FILE --concurrency 64

It polls from start to finish and is driven through stdin: each ``mark`` line
is answered on stdout with one JSON object (polls and errors so far);
``stop`` or the end of stdin ends it. The harness stops and
continues the process (SIGSTOP/SIGCONT) to take turns with the service, and
marks the start of its first turn and the end of its last (its own count,
beside the simulator's count of the same turns).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import aiohttp
import orjson
import uvloop
from yarl import URL

PATH = "/api/workspace/functions/jobs/"


async def run(url: str, ids: list[str], concurrency: int) -> None:
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=concurrency + 8, ttl_dns_cache=300), trust_env=False
    )
    headers = {"Accept": "application/json"}
    timeout = aiohttp.ClientTimeout(total=10)
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
                polls += 1

    tasks = [asyncio.create_task(worker(ids[i::concurrency])) for i in range(concurrency)]
    loop = asyncio.get_running_loop()
    commands = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    while (line := (await commands.readline()).strip()) not in (b"stop", b""):
        if line == b"mark":
            mark = {"polls": polls, "errors": errors}
            sys.stdout.write(orjson.dumps(mark).decode() + "\n")
            sys.stdout.flush()
    stop = True
    await asyncio.gather(*tasks, return_exceptions=True)
    await session.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--ids-file", required=True)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    with open(args.ids_file) as f:
        ids = [line.strip() for line in f if line.strip()]
    uvloop.run(run(args.url, ids, args.concurrency))


if __name__ == "__main__":
    main()
