"""Every active tracking of a SQLite file in one pass, read by a thread of its own.

A resume reads every active row once. One statement on a read-only connection
(one snapshot: rows written meanwhile are not in it, so the pass ends) is
stepped by a thread that also turns the rows into trackings, a chunk at a
time, while the event loop takes each chunk as it comes: the loop stays free
for the API between chunks. At most ``AHEAD`` chunks wait, so memory stays
near one chunk's rows whatever the table holds.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncGenerator
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

from orchestrator.store import codec, queries
from orchestrator.store.base import Tracking

AHEAD = 4
# How long the reader waits for room in the queue before it looks whether the
# pass was given up (the loop went away, or the consumer stopped early).
_PUT_WAIT_S = 0.5

_Item = list[Tracking] | BaseException | None


async def active_chunks(
    path: Path, size: int, busy_timeout_s: float
) -> AsyncGenerator[list[Tracking], None]:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[_Item] = asyncio.Queue(maxsize=AHEAD)
    given_up = threading.Event()

    def put(item: _Item) -> bool:
        """From the thread: False once the pass was given up."""
        while not given_up.is_set():
            try:
                asyncio.run_coroutine_threadsafe(queue.put(item), loop).result(_PUT_WAIT_S)
            except FutureTimeout:
                continue
            except RuntimeError:  # the loop is closed
                return False
            return True
        return False

    def read() -> None:
        try:
            conn = sqlite3.connect(
                f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=busy_timeout_s
            )
            try:
                cursor = conn.execute(queries.ACTIVE_ALL)
                while rows := cursor.fetchmany(size):
                    if not put([codec.active_tracking(row) for row in rows]):
                        return
            finally:
                conn.close()
        except BaseException as exc:  # handed to the consumer, which raises it
            put(exc)
            return
        put(None)

    reader = asyncio.ensure_future(asyncio.to_thread(read))
    try:
        while (item := await queue.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        given_up.set()
        while not queue.empty():  # a put waiting for room ends at once
            queue.get_nowait()
        await asyncio.wait([reader])
