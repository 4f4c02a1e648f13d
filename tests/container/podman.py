"""Podman, driven from tests: every object a test makes is named with the session's
prefix and removed by the test that made it; every wait is bounded.

Under CI, ``.ci/run`` installs podman (``scripts/install-podman.sh``) and points it
at a store of its own (``scripts/podman-sandbox.sh``), where the image's base is
pulled or, when no registry serves it, a stand-in built from Debian's packages.
A CI run without podman fails rather than skipping; elsewhere the tests skip,
saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

PREFIX = f"orch-test-{uuid.uuid4().hex[:8]}"


def require_podman() -> str:
    path = shutil.which("podman")
    if path is None:
        reason = "podman is not installed (scripts/install-podman.sh installs Debian's)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: CI must run the container tests")
        pytest.skip(reason)
    return path


def podman(*args: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: exit {done.returncode}: {done.stderr}")
    return done


def version() -> tuple[int, ...]:
    text = podman("version", "--format", "{{.Client.Version}}").stdout.strip()
    return tuple(int(part) for part in text.split("-")[0].split(".")[:3])


def inspect(name: str) -> dict[str, Any]:
    [found] = json.loads(podman("inspect", name).stdout)
    return dict(found)


def host_port(name: str, container_port: int = 8080) -> int:
    """The port on 127.0.0.1 that ``container_port`` is published on."""
    [line] = podman("port", name, f"{container_port}/tcp").stdout.split()
    host, _, port = line.rpartition(":")
    assert host == "127.0.0.1", line  # published on loopback only
    return int(port)


def process_status(name: str) -> dict[str, str]:
    """/proc/1/status of the container's main process, as its own kernel view shows it."""
    text = podman("exec", name, "cat", "/proc/1/status").stdout
    return {k: v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}


def wait_exit(name: str, timeout: float = 60) -> int:
    return int(podman("wait", name, timeout=timeout).stdout.split()[0])


def logs(name: str) -> str:
    done = podman("logs", name, check=False)
    return done.stdout + done.stderr


@dataclass
class Http:
    """JSON over HTTP to a published port on 127.0.0.1."""

    port: int
    token: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def call(self, method: str, path: str, body: Any = None, *, auth: bool = True) -> Any:
        status, answer = self.raw(method, path, body, auth=auth)
        assert 200 <= status < 300, (method, path, status, answer)
        return json.loads(answer) if answer else None

    def raw(
        self, method: str, path: str, body: Any = None, *, auth: bool = True
    ) -> tuple[int, str]:
        headers = {"Content-Type": "application/json"}
        if auth and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data, headers, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()


def wait_ready(name: str, http: Http, path: str = "/readyz", timeout: float = 60) -> None:
    """Until ``path`` answers 200; fails at once, with the logs, if the container stops."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not inspect(name)["State"]["Running"]:
            raise AssertionError(f"{name} stopped: {logs(name)[-3000:]}")
        try:
            if http.raw("GET", path, auth=False)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{name}: {path} not 200 within {timeout} s: {logs(name)[-3000:]}")


def until(what: str, check: Any, timeout: float = 60, every: float = 0.5) -> Any:
    """``check()`` until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"not within {timeout} s: {what}")
