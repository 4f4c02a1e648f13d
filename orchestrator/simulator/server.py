"""Serving the simulator: in-process on a free port for tests, or in the foreground for the CLI."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from aiohttp import web

from orchestrator.simulator.app import create_app
from orchestrator.simulator.front import Front
from orchestrator.simulator.keys import STATE
from orchestrator.simulator.state import SimState


class RunningSimulator:
    """A simulator serving on ``url``; close it with ``await close()`` or ``async with``."""

    def __init__(
        self,
        runner: web.AppRunner,
        host: str,
        port: int,
        front: tuple[asyncio.Server, Front] | None = None,
    ) -> None:
        self._runner = runner
        self._front = front
        self.host = host
        self.port = port
        self.url = f"http://{host}:{port}"

    @property
    def app(self) -> web.Application:
        return self._runner.app

    @property
    def state(self) -> SimState:
        """The simulated workspace itself, for tests that want to look inside."""
        return self._runner.app[STATE]

    @property
    def front_answered(self) -> int | None:
        """Status reads the front answered itself; None without the front."""
        return None if self._front is None else self._front[1].answered

    async def close(self) -> None:
        if self._front is not None:
            server, front = self._front
            server.close()
            front.close()
            await server.wait_closed()
        await self._runner.cleanup()

    async def __aenter__(self) -> RunningSimulator:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


async def start_simulator(
    host: str = "127.0.0.1",
    port: int = 0,
    profile: str = "default",
    seed: int | None = None,
    *,
    app: web.Application | None = None,
    front: bool | None = None,
    state_path: Path | None = None,
) -> RunningSimulator:
    """Serve a new simulator (or ``app``) on ``host:port``; port 0 picks a free one.

    Use as ``async with await start_simulator(profile="fast") as sim: ...``.
    ``front`` (default: the profile's ``fast_reads``) puts the status-read front
    of ``simulator/front.py`` on ``host:port``, aiohttp on a private port behind it.
    """
    app = app or create_app(profile, seed, state_path=state_path)
    state = app[STATE]
    if front is None:
        front = state.profile.fast_reads
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        # With the front, aiohttp listens on a private loopback port behind it.
        site = web.TCPSite(runner, "127.0.0.1" if front else host, 0 if front else port)
        await site.start()
        addresses = [a for a in runner.addresses if isinstance(a, tuple)]
        bound_port = int(addresses[0][1]) if addresses else port
        if not front:
            return RunningSimulator(runner, host, bound_port)
        shared = Front(state, "127.0.0.1", bound_port)
        server = await asyncio.get_running_loop().create_server(shared.protocol, host, port)
    except BaseException:
        await runner.cleanup()
        raise
    front_port = int(server.sockets[0].getsockname()[1])
    return RunningSimulator(runner, host, front_port, (server, shared))


def _split_listen(listen: str) -> tuple[str, int]:
    host, sep, port_text = listen.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"--listen must be HOST:PORT, not {listen!r}")
    return host.strip("[]") or "127.0.0.1", int(port_text)


async def _serve(
    host: str, port: int, profile: str, seed: int | None, state_path: Path | None
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with await start_simulator(host, port, profile, seed, state_path=state_path) as sim:
            kept = "" if state_path is None else f", state in {state_path}"
            print(
                f"Moltaro simulator ({profile} profile, seed {seed}{kept}) listening on {sim.url}",
                file=sys.stderr,
                flush=True,
            )
            await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def run_simulator(
    listen: str = "127.0.0.1:5080",
    profile: str = "default",
    seed: int | None = None,
    state_path: Path | None = None,
) -> None:
    """Serve in the foreground until SIGINT or SIGTERM, then close cleanly and return."""
    host, port = _split_listen(listen)
    create_app(profile, seed)  # fail fast, before binding, on an unknown profile
    try:
        import uvloop
    except ImportError:
        asyncio.run(_serve(host, port, profile, seed, state_path))
    else:
        uvloop.run(_serve(host, port, profile, seed, state_path))
