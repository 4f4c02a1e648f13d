"""The demo's service: a real ``orchestrator serve`` child process on a free loopback port."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from pathlib import Path

from orchestrator.client import OrchestratorClient

# Polling fast enough that a few hundred short jobs end in seconds; event
# retries fast enough that the sink's refusals are redelivered in the demo.
_CONFIG = """
[server]
listen = "127.0.0.1:{port}"
api_tokens_env = "ORCH_API_TOKENS"
shutdown_grace_s = 3
shutdown_hard_s = 2

[store]
path = "{db}"
synchronous = "NORMAL"

[polling]
initial_delay_s = 0.2
max_delay_s = 1.0
multiplier = 1.6
jitter = 0.2
default_deadline_s = 120
not_found_confirmations = 3
not_found_min_s = 1.0

[logging]
format = "json"
level = "WARNING"

[[workspaces]]
name = "default"
base_url = "{sim_url}"
request_timeout_s = 2
max_in_flight = 64
max_requests_per_second = 1000

[events]
retry_schedule_s = [0.3, 1, 2]
delivery_timeout_s = 5

[[events.sinks]]
name = "demo"
url = "{sink_url}"
secret_env = "ORCH_SINK_SECRET"
max_age_s = 600
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServeProcess:
    """``orchestrator serve`` with a generated config, a fresh SQLite file and its own token."""

    def __init__(self, workdir: Path, sim_url: str, sink_url: str, secret: str, token: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = workdir / "orchestrator.toml"
        self.log = workdir / "serve.log"
        self.config.write_text(
            _CONFIG.format(
                port=self.port, db=workdir / "demo.db", sim_url=sim_url, sink_url=sink_url
            )
        )
        self.secret = secret
        self.token = token
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, client: OrchestratorClient, timeout_s: float = 30.0) -> None:
        # The caller's own ORCH_* settings or WORKSPACE_API_BASE_URL must not
        # point the demo's service elsewhere.
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("ORCH_") and k != "WORKSPACE_API_BASE_URL"
        }
        env.update(ORCH_API_TOKENS=self.token, ORCH_SINK_SECRET=self.secret)
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "orchestrator",
                "serve",
                "--config",
                str(self.config),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
                # Its own process group: the terminal's Ctrl-C reaches the demo
                # only, which then stops the service in order.
                start_new_session=True,
            )
        async with asyncio.timeout(timeout_s):
            while not await client.ready():
                if self.proc.returncode is not None:
                    raise RuntimeError(f"orchestrator serve exited at start-up:\n{self.log_tail()}")
                await asyncio.sleep(0.05)

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    async def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM (a graceful drain), then SIGKILL if it lingers; the exit code."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return None if proc is None else proc.returncode
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            return await proc.wait()

    def kill_now(self) -> None:
        """Last resort when the loop is gone (the demo itself is being torn down)."""
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
