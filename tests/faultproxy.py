"""A TCP proxy of the tests' own between a replica and a server on 127.0.0.1, that
a test switches between faults while the connections stay up:

- ``pass``: bytes go through;
- ``hang``: bytes are held (sockets stay open, nothing is refused): a
  black-holed link, as a partition that drops packets without a reset looks;
- ``reset``: every connection is cut with a reset, and new ones too;
- ``delay``: every chunk goes on ``delay_s`` after it arrived, each direction
  (a slow or distant database).

Held bytes go on, in order, when the link passes again.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from typing import Literal

Mode = Literal["pass", "hang", "reset", "delay"]
CHUNK = 64 * 1024


class FaultProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.mode: Mode = "pass"
        self.delay_s = 0.0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def set(self, mode: Mode, delay_s: float = 0.0) -> None:
        self.mode, self.delay_s = mode, delay_s
        if mode == "hang":
            self._flowing.clear()
        else:
            self._flowing.set()
        if mode == "reset":
            for writer in list(self._writers):
                _reset(writer)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        self.set("reset")
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "reset":
            _reset(writer)
            return
        await self._flowing.wait()  # a hung link does not even connect
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _reset(writer)
            return
        self._writers |= {writer, up_writer}
        pipes = [
            asyncio.ensure_future(self._pipe(reader, up_writer)),
            asyncio.ensure_future(self._pipe(up_reader, writer)),
        ]
        self._tasks.update(pipes)
        try:
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pipes:
                task.cancel()
                self._tasks.discard(task)
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Bytes on, each chunk ``delay_s`` after it arrived (a link's latency: chunks
        in flight do not wait for each other)."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while (item := await queue.get())[1]:
                    await self._flowing.wait()
                    if self.mode == "delay" and self.delay_s > 0:
                        await asyncio.sleep(item[0] + self.delay_s - loop.time())
                    if self.mode == "reset":
                        return
                    writer.write(item[1])
                    await writer.drain()

        sender = asyncio.ensure_future(send())
        try:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await reader.read(CHUNK):
                    queue.put_nowait((loop.time(), data))
            queue.put_nowait((0.0, b""))
            await sender
        finally:
            sender.cancel()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST (linger 0), as a peer that lost its state does."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.close()
