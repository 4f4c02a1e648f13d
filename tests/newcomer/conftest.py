"""A simulator and a real ``orchestrator serve``, both child processes, shared by a module."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ORCH_") and k != "WORKSPACE_API_BASE_URL"
    }
    env.update(extra)
    return env


def wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-2000:]
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"{url} not ready: {log.read_text()[-2000:]}")


def stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(5)


@dataclass
class Stack:
    url: str
    sim_url: str
    token: str

    async def script(self, kind: str, steps: list[dict[str, Any]]) -> str:
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{self.sim_url}/_sim/script", json={"kind": kind, "steps": steps}
            ) as resp,
        ):
            assert resp.status == 201, await resp.text()
            return str((await resp.json())["id"])


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("stack")
    sim_port, port = free_port(), free_port()
    sim_log, serve_log = tmp / "sim.log", tmp / "serve.log"
    token = secrets.token_urlsafe(16)
    cfg = tmp / "orchestrator.toml"
    cfg.write_text(
        f"""
[server]
listen = "127.0.0.1:{port}"
shutdown_grace_s = 2

[store]
path = "{tmp / "orch.db"}"

[polling]
initial_delay_s = 0.05
max_delay_s = 0.3
not_found_confirmations = 3
not_found_min_s = 2.0  # long enough for a waiting CLI to see the confirmation

[logging]
format = "json"
level = "WARNING"

[[workspaces]]
name = "default"
base_url = "http://127.0.0.1:{sim_port}"
request_timeout_s = 2
"""
    )
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with sim_log.open("wb") as out:
            sim = subprocess.Popen(
                [sys.executable, "-m", "orchestrator", "simulate", "--profile", "fast",
                 "--listen", f"127.0.0.1:{sim_port}"],
                stdout=out, stderr=subprocess.STDOUT, env=clean_env(),
            )  # fmt: skip
        procs.append(sim)
        wait_http(f"http://127.0.0.1:{sim_port}/_sim/stats", sim, sim_log)
        with serve_log.open("wb") as out:
            serve = subprocess.Popen(
                [sys.executable, "-m", "orchestrator", "serve", "--config", str(cfg)],
                stdout=out, stderr=subprocess.STDOUT, env=clean_env(ORCH_API_TOKENS=token),
            )  # fmt: skip
        procs.append(serve)
        wait_http(f"http://127.0.0.1:{port}/readyz", serve, serve_log)
        yield Stack(f"http://127.0.0.1:{port}", f"http://127.0.0.1:{sim_port}", token)
        assert stop(serve) == 0, serve_log.read_text()[-2000:]
    finally:
        for proc in reversed(procs):
            stop(proc)


@contextlib.contextmanager
def serve_with_simulator(tmp_path: Path) -> Iterator[tuple[int, int]]:
    """``orchestrator serve --with-simulator`` on free ports and its embedded defaults
    otherwise (no token, SQLite in ``tmp_path``): yields (service port, simulator port)."""
    port, sim_port = free_port(), free_port()
    cfg = tmp_path / "orchestrator.toml"
    cfg.write_text(
        f'[server]\nlisten = "127.0.0.1:{port}"\nshutdown_grace_s = 1\n'
        f'[store]\npath = "{tmp_path / "orch.db"}"\n'
        "[polling]\ninitial_delay_s = 0.2\nmax_delay_s = 1.0\n"
        '[logging]\nformat = "json"\nlevel = "WARNING"\n'
        f'[[workspaces]]\nname = "default"\nbase_url = "http://127.0.0.1:{sim_port}"\n'
    )
    log = tmp_path / "serve.log"
    with log.open("ab") as out:
        serve = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "serve", "--config", str(cfg),
             "--with-simulator"],
            stdout=out, stderr=subprocess.STDOUT, env=clean_env(),
        )  # fmt: skip
    try:
        wait_http(f"http://127.0.0.1:{port}/readyz", serve, log)
        yield port, sim_port
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(20)


def for_ports(code: str, port: int, sim_port: int) -> str:
    """A documented example aimed at the ports a test's service and simulator use."""
    code = re.sub(r"(localhost|127\.0\.0\.1):8080", f"127.0.0.1:{port}", code)
    code = re.sub(r"(localhost|127\.0\.0\.1):5080", f"127.0.0.1:{sim_port}", code)
    return code.replace(".venv/bin/orchestrator", f"{sys.executable} -m orchestrator")
