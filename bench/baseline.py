"""The baselines: bare polling loops, the most polls per second a client library can do.

Two loops, chosen with ``--client``:

- ``aiohttp``: what a team writes by hand (the anchor of the targets);
- ``pyreqwest``: the client library the service itself sends with, so its
  figure is the limit of the stack we run on.

Both run on uvloop with the service's request settings (``Accept`` header,
per-request timeout, no redirects, pre-quoted URL) and parse each body with
orjson; no scheduling, no interpretation, no store, no metrics.
``concurrency`` workers each loop over their share of the ids.

    python bench/baseline.py --client aiohttp --url URL --ids-file FILE --concurrency 64

It polls from start to finish and is driven through stdin: each ``mark`` line
is answered on stdout with one JSON object (polls and errors so far);
``stop`` or the end of stdin ends it. The harness stops and continues the
process (SIGSTOP/SIGCONT) to take turns with the service.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta

import aiohttp
import orjson
import uvloop
from pyreqwest.client import ClientBuilder
from yarl import URL

PATH = "/api/workspace/functions/jobs/"
HEADERS = {"Accept": "application/json"}

# One read: (url) -> (status, body).
Read = Callable[[str], Awaitable[tuple[int, bytes]]]


def aiohttp_reader(concurrency: int) -> tuple[Read, Callable[[], Awaitable[None]]]:
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=concurrency + 8, ttl_dns_cache=300), trust_env=False
    )
    timeout = aiohttp.ClientTimeout(total=10)

    async def read(url: str) -> tuple[int, bytes]:
        async with session.request(
            "GET", URL(url, encoded=True), headers=HEADERS, timeout=timeout, allow_redirects=False
        ) as resp:
            return resp.status, await resp.read()

    return read, session.close


def pyreqwest_reader(concurrency: int) -> tuple[Read, Callable[[], Awaitable[None]]]:
    client = (
        ClientBuilder()
        .follow_redirects(False)
        .pool_max_idle_per_host(concurrency)
        .default_headers(HEADERS)
        .build()
    )
    timeout = timedelta(seconds=10)

    async def read(url: str) -> tuple[int, bytes]:
        resp = await client.get(url).timeout(timeout).build().send()
        return resp.status, bytes(await resp.bytes())

    return read, client.close


READERS = {"aiohttp": aiohttp_reader, "pyreqwest": pyreqwest_reader}


async def run(client: str, url: str, ids: list[str], concurrency: int) -> None:
    read, close = READERS[client](concurrency)
    polls = 0
    errors = 0
    stop = False

    async def worker(mine: list[str]) -> None:
        nonlocal polls, errors
        while not stop:
            for rid in mine:
                if stop:
                    return
                status, raw = await read(url + PATH + rid)
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
    await close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", choices=sorted(READERS), default="aiohttp")
    parser.add_argument("--url", required=True)
    parser.add_argument("--ids-file", required=True)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    with open(args.ids_file) as f:
        ids = [line.strip() for line in f if line.strip()]
    uvloop.run(run(args.client, args.url, ids, args.concurrency))


if __name__ == "__main__":
    main()
