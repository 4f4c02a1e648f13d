"""Reader processes: a large resume's first status reads spread over more cores.

After a restart every active tracking is owed a read, and one event loop reads
no faster than one core lets aiohttp (about 0.1 ms of CPU a read on the
team's 2-core box, where a restart with 100,000 active took 15-22 s of reads
with the loop alone).
With ``polling.resume_readers = N`` the service starts N child processes as it
starts, and until every resumed tracking has had its first read, those reads
are made by the children. Everything that decides stays in the service's own
loop: the schedule, the workspace's rate limit and in-flight bound, the
interpretation, the store. A child only makes the exchange it is handed, with
the workspace's own ``WorkspaceClient``, and hands back the classified
``ReadResult``. Once the resume is read, the children are closed and every
read is the loop's own again: in steady state one loop spends less CPU per
read than a loop plus a child.

Frames on the child's stdin and stdout: a 4-byte length, then a pickle (both
ends are this package, started by this process; nothing else writes there).
A child that dies fails its reads as transport trouble (read again later by
the loop); the others go on.

A child reads with ``lean_http`` rather than aiohttp (about a third of the CPU
a read, measured in docs/performance.md) and judges each answer with the same
``readresult.answered`` as the loop; it imports neither aiohttp nor pydantic,
so it is ready sooner. Its setup is plain data for the same reason.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import struct
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.engine.readresult import ReadResult

if TYPE_CHECKING:
    from orchestrator.engine.workspace import WorkspaceClient

log = logging.getLogger("orchestrator.readers")

_LEN = struct.Struct("!I")
CHILD_MODULE = "orchestrator.engine.reader_process"


def encode(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LEN.pack(len(data)) + data


async def decode(stream: asyncio.StreamReader) -> Any:
    """The next message; ``IncompleteReadError`` at the end of the stream."""
    (size,) = _LEN.unpack(await stream.readexactly(_LEN.size))
    return pickle.loads(await stream.readexactly(size))


def client_setup(clients: Mapping[str, WorkspaceClient]) -> list[dict[str, Any]]:
    """What a child needs to read as each workspace's client does."""
    return [
        {
            "name": c.name,
            "base_url": c.cfg.base_url,
            "token": c.token,
            "timeout_s": c.cfg.request_timeout_s,
            "max_in_flight": c.cfg.max_in_flight,
            "templates": {kind: c.route_template(kind) for kind in c.digest_keys},
            "digest_keys": dict(c.digest_keys),
        }
        for c in clients.values()
    ]


def result_tuple(token: int, r: ReadResult) -> tuple[Any, ...]:
    return (
        token,
        r.result,
        r.http_status,
        r.body,
        r.retry_after,
        r.error,
        r.duration,
        r.digest,
        r.unchanged,
    )


class _Child:
    __slots__ = ("alive", "index", "outbox", "pending", "proc", "replies")

    def __init__(self, index: int, proc: asyncio.subprocess.Process) -> None:
        self.index = index
        self.proc = proc
        self.pending: dict[int, asyncio.Future[ReadResult]] = {}
        self.outbox: list[tuple[Any, ...]] = []
        self.replies: asyncio.Task[None] | None = None
        self.alive = True


class ReaderPool:
    def __init__(self, count: int) -> None:
        self.count = count
        self._children: list[_Child] = []
        self._token = 0
        self.handed = 0  # reads handed to the children, for the closing log line
        self._flush_armed = False
        self._closing = False
        self._logged = False

    async def spawn(self) -> None:
        """Start the children; they import while the service loads its trackings."""
        for i in range(self.count):
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                CHILD_MODULE,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            child = _Child(i, proc)
            child.replies = asyncio.create_task(self._replies(child), name=f"reader-{i}")
            self._children.append(child)

    def configure(self, clients: Mapping[str, WorkspaceClient]) -> None:
        self._broadcast(("setup", client_setup(clients)))

    def update_keys(self, clients: Mapping[str, WorkspaceClient]) -> None:
        """The enums changed: the children digest bodies with the new keys."""
        self._broadcast(("keys", {name: dict(c.digest_keys) for name, c in clients.items()}))

    def _broadcast(self, message: tuple[Any, ...]) -> None:
        data = encode(message)
        for child in self._children:
            if child.alive and child.proc.stdin is not None:
                child.proc.stdin.write(data)

    def read(
        self, workspace: str, kind: str, remote_id: str, seen: bytes | None
    ) -> asyncio.Future[ReadResult] | None:
        """Hand the read to the child holding the fewest; None once closing or with
        no child alive (the loop then reads it itself).

        The loop reads none of the resume itself while a child is alive: measured
        on 2 cores, the loop sharing the reads left the children waiting on it
        (its own reads cost it four times what a handed-over one does).
        """
        if self._closing:
            return None
        child = None
        for c in self._children:
            if c.alive and (child is None or len(c.pending) < len(child.pending)):
                child = c
        if child is None:
            return None
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ReadResult] = loop.create_future()
        self._token += 1
        self.handed += 1
        child.pending[self._token] = future
        child.outbox.append((self._token, workspace, kind, remote_id, seen))
        if not self._flush_armed:
            # Every read handed over in this turn of the loop goes in one write.
            self._flush_armed = True
            loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        self._flush_armed = False
        for child in self._children:
            if child.outbox:
                batch, child.outbox = child.outbox, []
                if child.alive and child.proc.stdin is not None:
                    child.proc.stdin.write(encode(("read", batch)))

    async def _replies(self, child: _Child) -> None:
        stdout = child.proc.stdout
        assert stdout is not None
        try:
            while True:
                for item in await decode(stdout):
                    future = child.pending.pop(item[0], None)
                    if future is not None and not future.done():
                        future.set_result(ReadResult(*item[1:]))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the child ended
        except Exception:
            # An answer that cannot be taken: the child is dropped (it exits at
            # the end of its stdin), its reads failed as below.
            log.exception(
                "reader process answer unreadable", extra={"fields": {"reader": child.index}}
            )
            if child.proc.stdin is not None:
                child.proc.stdin.close()
        finally:
            child.alive = False
            self._fail(child)

    def _fail(self, child: _Child) -> None:
        """A child gone: its unanswered reads are transport trouble, read again later."""
        if child.pending:
            log.warning(
                "reader process ended with reads in flight",
                extra={"fields": {"reader": child.index, "reads": len(child.pending)}},
            )
        for future in child.pending.values():
            if not future.done():
                future.set_result(
                    ReadResult(
                        "connection",
                        error={"kind": "connection", "message": "reader process ended"},
                    )
                )
        child.pending.clear()

    async def close(self, timeout_s: float = 10.0) -> None:
        """No new reads; the children answer what they hold, then exit (killed after
        ``timeout_s``). Safe to call again: it waits for the same exits."""
        if not self._closing:
            self._closing = True
            self._flush()
            for child in self._children:
                if child.proc.stdin is not None and not child.proc.stdin.is_closing():
                    child.proc.stdin.close()
        for child in self._children:
            try:
                async with asyncio.timeout(timeout_s):
                    await child.proc.wait()
            except TimeoutError:
                log.warning("reader process killed", extra={"fields": {"reader": child.index}})
                child.proc.kill()
                await child.proc.wait()
            if child.replies is not None:
                await child.replies
        if not self._logged:
            self._logged = True
            log.info(
                "reader processes closed",
                extra={"fields": {"readers": self.count, "reads": self.handed}},
            )
