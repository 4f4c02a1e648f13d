"""A reader process (see ``readers``): status reads for the service that started it.

Run as ``python -m orchestrator.engine.reader_process`` by ``ReaderPool``, never
by hand. Messages arrive on stdin; results leave on stdout, which is kept for
them alone (anything printed goes to stderr instead). At the end of stdin it
answers what it holds and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
import traceback
from typing import Any

import uvloop

from orchestrator.engine.lean_http import LeanClient
from orchestrator.engine.readers import decode, encode, result_tuple
from orchestrator.engine.readresult import ReadResult, answered, timed_out, trouble

_USER_AGENT = "Python/{}.{} orchestrator-reader".format(*sys.version_info[:2])


class WorkspaceReads:
    """A workspace's status reads as its ``WorkspaceClient`` makes them: same URL,
    ``Accept`` and bearer token, same total timeout, same judgement; a leaner
    client underneath (its own User-Agent, and no Accept-Encoding asked)."""

    def __init__(self, setup: dict[str, Any]) -> None:
        headers = {"Accept": "application/json", "User-Agent": _USER_AGENT}
        if setup["token"]:
            headers["Authorization"] = f"Bearer {setup['token']}"
        self.client = LeanClient(setup["base_url"], headers, setup["max_in_flight"])
        self.timeout_s: float = setup["timeout_s"]
        self.templates: dict[str, str] = setup["templates"]
        self.digest_keys: dict[str, bytes] = setup["digest_keys"]

    async def read(self, kind: str, remote_id: str, seen: bytes | None) -> ReadResult:
        started = time.monotonic()
        try:
            status, raw, retry_after = await self.client.get(
                self.templates[kind].replace("{id}", remote_id), self.timeout_s
            )
        except TimeoutError:
            return timed_out(self.timeout_s, time.monotonic() - started)
        except OSError as exc:
            return trouble("connection", type(exc).__name__, time.monotonic() - started)
        return answered(
            status, raw, retry_after, time.monotonic() - started, seen, self.digest_keys[kind]
        )


class _Replies:
    """Results of one turn of the loop, written together."""

    def __init__(self, out: asyncio.StreamWriter) -> None:
        self.out = out
        self.batch: list[tuple[Any, ...]] = []

    def add(self, item: tuple[Any, ...]) -> None:
        if not self.batch:
            asyncio.get_running_loop().call_soon(self.flush)
        self.batch.append(item)

    def flush(self) -> None:
        if self.batch:
            batch, self.batch = self.batch, []
            self.out.write(encode(batch))


async def serve(channel_in: int, channel_out: int) -> None:
    loop = asyncio.get_running_loop()
    stream = asyncio.StreamReader(limit=2**24)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(stream), os.fdopen(channel_in, "rb", 0)
    )
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(channel_out, "wb", 0)
    )
    out = asyncio.StreamWriter(transport, protocol, None, loop)
    replies = _Replies(out)
    clients: dict[str, WorkspaceReads] = {}
    running: set[asyncio.Task[None]] = set()

    async def one(token: int, workspace: str, kind: str, remote_id: str, seen: Any) -> None:
        try:
            result = await clients[workspace].read(kind, remote_id, seen)
        except Exception as exc:
            # Every read handed over is answered, or its poller would wait
            # forever: a failure no read should have is transport trouble
            # there (read again later) and a traceback on stderr here.
            traceback.print_exc()
            message = f"reader process: {type(exc).__name__}"
            result = ReadResult("connection", error={"kind": "connection", "message": message})
        replies.add(result_tuple(token, result))

    try:
        while True:
            try:
                message = await decode(stream)
            except asyncio.IncompleteReadError:
                break
            what = message[0]
            if what == "read":
                for token, workspace, kind, remote_id, seen in message[1]:
                    task = asyncio.create_task(one(token, workspace, kind, remote_id, seen))
                    running.add(task)
                    task.add_done_callback(running.discard)
            elif what == "setup":
                for setup in message[1]:
                    clients[setup["name"]] = WorkspaceReads(setup)
            elif what == "keys":
                for name, keys in message[1].items():
                    clients[name].digest_keys = keys
        if running:
            await asyncio.wait(running)
        replies.flush()
        await out.drain()
    finally:
        for client in clients.values():
            client.client.close()


def main() -> None:
    # The results channel is stdout's descriptor; fd 1 itself is pointed at
    # stderr so that a stray print cannot corrupt a frame.
    channel_out = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # A Ctrl-C or a stop signal sent to the whole process group is the
    # service's to handle: it closes stdin when it stops, and a service that
    # dies closes it too. The reads in hand are answered first either way.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # BrokenPipe: the service went away before reading the last answers.
    with contextlib.suppress(BrokenPipeError, ConnectionError):
        uvloop.run(serve(0, channel_out))


if __name__ == "__main__":
    main()
