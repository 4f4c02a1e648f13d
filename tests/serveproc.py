"""A real ``orchestrator serve`` subprocess that tests start, kill and restart."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServeProcess:
    """``python -m orchestrator serve`` with its output captured in ``log``."""

    def __init__(self, cfg: Path, port: int, log: Path, env: dict[str, str] | None = None) -> None:
        self.cfg, self.port, self.log = cfg, port, log
        self.url = f"http://127.0.0.1:{port}"
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.kills = 0

    def spawn(self) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ORCH_")}
        env.pop("WORKSPACE_API_BASE_URL", None)
        env.update(self.env)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "orchestrator", "serve", "--config", str(self.cfg)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        return self.proc

    async def start(self, session: aiohttp.ClientSession, timeout: float = 30) -> None:
        proc = self.spawn()
        async with asyncio.timeout(timeout):
            while True:
                if proc.poll() is not None:
                    raise AssertionError(f"serve exited {proc.returncode}: {self.tail()}")
                try:
                    async with session.get(f"{self.url}/readyz") as resp:
                        if resp.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.05)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.kills += 1

    def terminate(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)

    def ensure_dead(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def tail(self, n: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""
