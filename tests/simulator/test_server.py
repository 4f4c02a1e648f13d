"""Serving: in-process on a free port, and in the foreground until a signal."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys

import aiohttp
import pytest

from orchestrator.simulator import PROFILES, create_app, start_simulator


def test_profiles_are_listed() -> None:
    assert {"default", "fast", "bench", "chaos"} <= set(PROFILES)
    assert PROFILES["bench"].request_log is False and not PROFILES["bench"].faults
    assert PROFILES["bench"].fast_reads and not PROFILES["default"].fast_reads
    assert PROFILES["chaos"].faults


def test_unknown_profile_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown simulator profile"):
        create_app("warp-speed")


async def test_start_simulator_serves_and_closes() -> None:
    async with await start_simulator(profile="default", seed=3) as sim:
        assert sim.port > 0 and sim.url == f"http://127.0.0.1:{sim.port}"
        async with aiohttp.ClientSession() as client, client.get(f"{sim.url}/_sim/profile") as r:
            body = await r.json()
            assert body["name"] == "default" and body["seed"] == 3
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", sim.port)) != 0  # closed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_run_simulator_stops_cleanly_on_sigterm() -> None:
    port = _free_port()
    code = (
        "from orchestrator.simulator import run_simulator;"
        f"run_simulator('127.0.0.1:{port}', 'fast', 5)"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stderr=asyncio.subprocess.PIPE
    )
    try:
        # It says when it listens: waiting for that line, not polling against a
        # clock, holds on a machine of any speed (pytest-timeout guards a hang).
        assert proc.stderr is not None
        lines = [await proc.stderr.readline()]
        while lines[-1] and b"listening on http://127.0.0.1" not in lines[-1]:
            lines.append(await proc.stderr.readline())
        assert lines[-1], b"".join(lines)  # ended without saying it listens
        async with (
            aiohttp.ClientSession() as client,
            client.get(f"http://127.0.0.1:{port}/_sim/stats") as r,
        ):
            assert r.status == 200
        proc.send_signal(signal.SIGTERM)
        _, err = await proc.communicate()
        assert proc.returncode == 0, err
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
