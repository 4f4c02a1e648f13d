"""Processes the benchmark runs, and what it reads about them from /proc and /metrics.

CPU and RSS come from ``/proc/<pid>/stat`` and ``/proc/<pid>/statm`` (no
psutil: it is not a dependency). Counters come from the service's own
Prometheus text, parsed here without a client library.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parent.parent
# Every child this harness started, so that a failed run leaves none behind.
SPAWNED: list[subprocess.Popen[bytes]] = []
_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        raw = f.read()
    # The command name may contain spaces: fields are counted after its ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * _PAGE


@dataclass(slots=True)
class CpuMark:
    pid: int
    cpu: float
    wall: float

    @classmethod
    def take(cls, pid: int) -> CpuMark:
        return cls(pid, cpu_seconds(pid), time.monotonic())

    def since(self) -> tuple[float, float]:
        """(CPU seconds, wall seconds) since this mark."""
        return cpu_seconds(self.pid) - self.cpu, time.monotonic() - self.wall


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCH_")}
    env.pop("WORKSPACE_API_BASE_URL", None)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


async def wait_http(
    session: aiohttp.ClientSession, url: str, proc: subprocess.Popen[bytes], log: Path
) -> None:
    async with asyncio.timeout(120):
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args!r} exited: {log.read_text()[-2000:]}")
            try:
                async with session.get(url) as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.02)


class Simulator:
    """``orchestrator simulate`` in its own process on a free loopback port."""

    def __init__(self, workdir: Path, profile: str = "bench", seed: int = 1) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "simulator.log"
        self.args = [
            sys.executable, "-m", "orchestrator", "simulate",
            "--listen", f"127.0.0.1:{self.port}", "--profile", profile, "--seed", str(seed),
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self, session: aiohttp.ClientSession) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.args, stdout=out, stderr=subprocess.STDOUT, env=_env()
            )
        SPAWNED.append(self.proc)
        await wait_http(session, f"{self.url}/_sim/stats", self.proc, self.log)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def serve_config(
    path: Path,
    *,
    port: int,
    db: Path,
    sim_url: str,
    polling: dict[str, Any],
    max_in_flight: int,
    rate: float,
    sink_url: str | None = None,
    replica: dict[str, Any] | None = None,
) -> Path:
    """``replica`` (``url``, ``replica_id``, ``lease_timeout_s``, ``stall_lag_s``)
    puts the service on a shared PostgreSQL store instead of ``db``."""
    store = [f'path = "{db}"']
    server: list[str] = []
    pol = dict(polling)
    if replica is not None:
        store = [f'url = "{replica["url"]}"', f"lease_timeout_s = {replica['lease_timeout_s']}"]
        server = [f'replica_id = "{replica["replica_id"]}"']
        pol["stall_lag_s"] = replica["stall_lag_s"]
    lines = [
        "[server]",
        f'listen = "127.0.0.1:{port}"',
        "allow_unauthenticated = true",
        "shutdown_grace_s = 5",
        *server,
        "[store]",
        *store,
        "[polling]",
        *(f"{k} = {str(v).lower() if isinstance(v, bool) else repr(v)}" for k, v in pol.items()),
        "max_deadline_s = 604800",
        "[logging]",
        'format = "json"',
        'level = "WARNING"',
        "[[workspaces]]",
        'name = "default"',
        f'base_url = "{sim_url}"',
        f"max_in_flight = {max_in_flight}",
        f"max_requests_per_second = {rate!r}",
        "request_timeout_s = 10",
    ]
    if sink_url is not None:
        lines += ["[[events.sinks]]", 'name = "bench"', f'url = "{sink_url}"', "max_in_flight = 64"]
        lines += ['signing = "none"']  # the bench sink does not verify
    path.write_text("\n".join(lines) + "\n")
    return path


class Serve:
    """A real ``orchestrator serve`` process with its own TOML file."""

    def __init__(self, cfg: Path, port: int, log: Path) -> None:
        self.cfg, self.port, self.log = cfg, port, log
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0

    def spawn(self) -> None:
        self.started_at = time.time()
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "orchestrator", "serve", "--config", str(self.cfg)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=_env(),
            )
        SPAWNED.append(self.proc)

    async def start(self, session: aiohttp.ClientSession) -> None:
        self.spawn()
        await self.ready(session)

    async def ready(self, session: aiohttp.ClientSession) -> None:
        assert self.proc is not None
        await wait_http(session, f"{self.url}/readyz", self.proc, self.log)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(20)

    def terminate(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is not None:
            return self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)


async def scrape(session: aiohttp.ClientSession, base: str) -> dict[str, Any]:
    """Sums of the service's counters and histogram buckets the benchmark reads."""
    async with session.get(f"{base}/metrics") as resp:
        text = await resp.text()
    polls = 0.0
    polls_ok = 0.0
    resume_pending = 0.0
    write_backlog = 0.0
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith("orchestrator_polls_total{"):
            value = float(line.rsplit(" ", 1)[1])
            polls += value
            if 'result="ok"' in line:
                polls_ok += value
        elif line.startswith("orchestrator_resume_pending{"):
            resume_pending += float(line.rsplit(" ", 1)[1])
        elif line.startswith("orchestrator_write_backlog "):
            write_backlog = float(line.rsplit(" ", 1)[1])
        elif line.startswith("orchestrator_poll_lateness_seconds_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            bound = float("inf") if le == "+Inf" else float(le)
            buckets[bound] = buckets.get(bound, 0.0) + float(line.rsplit(" ", 1)[1])
    return {
        "polls": polls,
        "polls_ok": polls_ok,
        "resume_pending": resume_pending,
        "write_backlog": write_backlog,
        "lateness": buckets,
    }


def histogram_quantile(q: float, before: dict[float, float], after: dict[float, float]) -> float:
    """Prometheus-style quantile of the observations between two scrapes (linear in a bucket)."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1] if counts else 0.0
    if total <= 0:
        return 0.0
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=True):
        if count >= rank:
            if bound == float("inf"):
                return prev_bound
            span = count - prev_count
            share = (rank - prev_count) / span if span > 0 else 1.0
            return prev_bound + (bound - prev_bound) * share
        prev_bound, prev_count = bound, count
    return prev_bound


def kill_spawned() -> None:
    for proc in SPAWNED:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
