"""One live ``orchestrator serve`` per module, with tokens, a signed sink and an allowlisted callback.

The simulator and the sink run on an event loop in a background thread so
that synchronous tests (schemathesis, hypothesis) and async tests can share
them; the service is a real subprocess whose output is captured for the
secret checks.
"""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from orchestrator.simulator import RunningSimulator, start_simulator
from tests.chaos.harness import (
    Secrets,
    Sink,
    write_config,
)
from tests.serveproc import ServeProcess, free_port

T = TypeVar("T")


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="sec-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@dataclass
class Live:
    url: str
    token: str
    sim_url: str
    callback_prefix: str
    sink: Sink
    secrets: Secrets
    serve: ServeProcess

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def _wait_ready(serve: ServeProcess, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert serve.proc is not None
        if serve.proc.poll() is not None:
            raise AssertionError(f"serve exited: {serve.tail()}")
        try:
            with urllib.request.urlopen(serve.url + "/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    raise AssertionError("serve never became ready")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    workdir: Path = tmp_path_factory.mktemp("live")
    secrets = Secrets()
    loop = LoopThread()
    sink = Sink(secrets.sink_secret, callback_secret=secrets.callback_secret)
    sim: RunningSimulator | None = None
    serve: ServeProcess | None = None
    try:
        sim = loop.run(start_simulator(host="127.0.0.1", port=0, profile="fast", seed=3))
        sink_url = loop.run(sink.start())
        port = free_port()
        callback_prefix = sink.url + "/callbacks"
        cfg = write_config(
            workdir,
            port=port,
            sim_url=sim.url,
            store_path=workdir / "orch.db",
            sink_url=sink_url,
            callback_prefix=callback_prefix,
            level="DEBUG",
        )
        serve = ServeProcess(cfg, port, workdir / "serve.log", secrets.env())
        serve.spawn()
        _wait_ready(serve)
        yield Live(serve.url, secrets.api_token, sim.url, callback_prefix, sink, secrets, serve)
        assert serve.terminate() == 0, serve.tail()
    finally:
        if serve is not None:
            serve.ensure_dead()
        loop.run(sink.close())
        if sim is not None:
            loop.run(sim.close())
        loop.close()
