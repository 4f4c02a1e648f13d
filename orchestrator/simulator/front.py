"""A front for the simulator's hottest request, the status read.

The benchmark's baseline is meant to be the most polls per second this
machine's HTTP client can make, so the server must not be what sets that rate.
Behind aiohttp's web stack the simulator spent about 0.14 ms of a core per
status read and ran out of core first. The front answers a plain keep-alive
``GET`` of a job or build status straight from the simulator's state, the same
bytes, status line and counters as the aiohttp route, for about a seventh of
that cost.

Anything else, and anything while fault rules are installed, is not the front's
business: from its first such request on, a connection is relayed byte for byte
to the aiohttp application on an internal loopback port, which then answers
everything on that connection (faults, resets and all). Responses are never
reordered, because a connection goes one way or the other and never back.
"""

from __future__ import annotations

import asyncio
import sys
import time
from email.utils import formatdate
from typing import cast

import aiohttp

from orchestrator.simulator.model import Build, Job
from orchestrator.simulator.reqlog import REPLICA_HEADER
from orchestrator.simulator.routes_workspace import PROJECTS, status_body
from orchestrator.simulator.state import SimState

_MAX_HEAD = 16_384  # a longer head goes to aiohttp, which knows how to refuse it
_JOBS = b"/api/workspace/functions/jobs/"
_ADMIN = b"/api/workspace/admin/"
# Headers that make a GET more than a plain read: the relay handles those.
_NOT_PLAIN = tuple(
    b"\r\n%s:" % h
    for h in (b"content-length", b"transfer-encoding", b"connection", b"upgrade", b"expect")
)
_REPLICA = b"\r\n" + REPLICA_HEADER.lower().encode() + b":"
_PYTHON = "{}.{}".format(*sys.version_info[:2])
_SERVER = f"Python/{_PYTHON} aiohttp/{aiohttp.__version__}".encode()  # aiohttp's own


class Front:
    """What the connections share: the state, the relay's address, the date."""

    def __init__(self, state: SimState, relay_host: str, relay_port: int) -> None:
        self.state = state
        self.relay = (relay_host, relay_port)
        self._second = -1  # the second self._date was formatted in
        self._date = b""
        self.connections: set[_Connection] = set()
        self.answered = 0  # status reads the front answered itself

    def date(self) -> bytes:
        """The ``Date`` header's value, formatted once a second."""
        second = int(time.time())
        if second != self._second:
            self._second = second
            self._date = formatdate(second, usegmt=True).encode()
        return self._date

    def protocol(self) -> _Connection:
        return _Connection(self)

    def answer(self, head: bytes) -> bytes | None:
        """The whole response to a request head, or None to relay it."""
        line_end = head.find(b"\r\n")
        line = head if line_end < 0 else head[:line_end]
        parts = line.split(b" ")
        if len(parts) != 3 or parts[0] != b"GET" or parts[2] != b"HTTP/1.1":
            return None
        target = parts[1]
        if b"?" in target or b"%" in target:
            return None
        replica: str | None = None
        if line_end >= 0:
            lower = head[line_end:].lower()
            if any(h in lower for h in _NOT_PLAIN):
                return None
            at = lower.find(_REPLICA)
            if at >= 0:
                start = line_end + at + len(_REPLICA)
                end = head.find(b"\r\n", start)
                replica = head[start : end if end >= 0 else len(head)].strip().decode("latin-1")
        st = self.state
        if st.faults.rules:
            return None
        record: Job | Build | None
        if target.startswith(_JOBS):
            rid = target[len(_JOBS) :]
            if not rid or b"/" in rid:
                return None
            route, kind = "job_status", "job"
            rid_text = rid.decode("latin-1")
            job = st.jobs.get(rid_text)
            record, visible = job, job is not None and job.meta.runtime_visible
        elif target.startswith(_ADMIN):
            pieces = target[len(_ADMIN) :].split(b"/")
            if len(pieces) != 3 or pieces[1] != b"builds" or not pieces[2]:
                return None
            kind = PROJECTS.get(pieces[0].decode("latin-1"), "")
            if not kind:
                return None
            route = "build_status"
            rid_text = pieces[2].decode("latin-1")
            record, visible = st.builds[kind].get(rid_text), True
        else:
            return None
        # What the aiohttp middleware does for this route, in its order.
        now = st.clock()
        st.tick(now)
        if record is None or not visible:
            return None  # aiohttp answers the 404 problem
        body = status_body(st, record, kind, now)
        if body is None:
            return None
        st.log.count(route, 200)
        self.answered += 1
        if st.log.enabled:
            st.log.record(rid_text, now, "GET", target.decode("latin-1"), route, 200, replica)
        return b"".join(
            (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ",
                str(len(body)).encode(),
                b"\r\nDate: ",
                self.date(),
                b"\r\nServer: ",
                _SERVER,
                b"\r\n\r\n",
                body,
            )
        )

    def close(self) -> None:
        for connection in list(self.connections):
            connection.close()


class _Relay(asyncio.Protocol):
    """The internal side of a relayed connection: aiohttp's answers go back out."""

    def __init__(self, outer: _Connection) -> None:
        self.outer = outer
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        outer = self.outer.transport
        if outer is not None and not outer.is_closing():
            outer.write(data)

    def eof_received(self) -> bool | None:
        return False  # aiohttp is done with the connection: so is the caller's side

    def connection_lost(self, exc: Exception | None) -> None:
        # A failed connection is aborted outside too; a close (aiohttp's abort
        # for the reset fault arrives as one) closes it after what aiohttp wrote.
        self.outer.relay_lost(exc)

    # aiohttp reads slower than the caller writes: stop reading the caller.
    def pause_writing(self) -> None:
        if self.outer.transport is not None:
            self.outer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.outer.transport is not None and not self.outer.transport.is_closing():
            self.outer.transport.resume_reading()


class _Connection(asyncio.Protocol):
    def __init__(self, front: Front) -> None:
        self.front = front
        self.transport: asyncio.Transport | None = None
        self._buffer = b""
        self._relay: _Relay | None = None
        self._relaying = False
        self._pending: list[bytes] = []
        self._connecting: asyncio.Task[None] | None = None  # held: the loop keeps only a weak one
        self._eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.front.connections.add(self)

    def data_received(self, data: bytes) -> None:
        if self._relaying:
            relay = self._relay
            if relay is not None and relay.transport is not None:
                relay.transport.write(data)
            else:
                self._pending.append(data)
            return
        buffer = self._buffer + data if self._buffer else data
        answers: list[bytes] = []
        while buffer:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > _MAX_HEAD:
                    break  # relayed below
                self._buffer = buffer
                self._flush(answers)
                return
            answer = self.front.answer(buffer[:end])
            if answer is None:
                break  # relayed below
            answers.append(answer)
            buffer = buffer[end + 4 :]
        self._buffer = b""
        self._flush(answers)
        if buffer:
            self._start_relay(buffer)

    def _flush(self, answers: list[bytes]) -> None:
        if answers and self.transport is not None:
            self.transport.write(answers[0] if len(answers) == 1 else b"".join(answers))

    def _start_relay(self, first: bytes) -> None:
        self._relaying = True
        self._pending.append(first)
        self._connecting = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        host, port = self.front.relay
        try:
            _, relay = await loop.create_connection(lambda: _Relay(self), host, port)
        except OSError:
            if self.transport is not None:
                self.transport.abort()
            return
        assert relay.transport is not None
        if self.transport is None or self.transport.is_closing():
            relay.transport.close()
            return
        self._relay = relay
        relay.transport.write(b"".join(self._pending))
        self._pending.clear()
        if self._eof and relay.transport.can_write_eof():
            relay.transport.write_eof()

    def relay_lost(self, exc: Exception | None) -> None:
        if self.transport is None:
            return
        if exc is None:
            self.transport.close()
        else:
            self.transport.abort()

    def eof_received(self) -> bool | None:
        if not self._relaying:
            return False  # nothing outstanding: the front answers as it reads
        self._eof = True
        relay = self._relay
        if relay is not None and relay.transport is not None and relay.transport.can_write_eof():
            relay.transport.write_eof()
        return True  # keep our side open for aiohttp's last answers

    # The caller reads slower than answers come: stop reading from whichever side writes them.
    def pause_writing(self) -> None:
        relay = self._relay
        if relay is not None and relay.transport is not None:
            relay.transport.pause_reading()
        elif self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        relay = self._relay
        if relay is not None and relay.transport is not None:
            relay.transport.resume_reading()
        elif self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.front.connections.discard(self)
        relay = self._relay
        if relay is not None and relay.transport is not None:
            relay.transport.close()
        self.transport = None

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
