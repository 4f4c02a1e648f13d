"""``orchestrator health``: the probe of the image's HEALTHCHECK and the pod's exec probes."""

from __future__ import annotations

import subprocess
import sys

from tests.newcomer.conftest import Stack, clean_env, free_port


def health(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", "health", *args],
        capture_output=True, text=True, timeout=30, env=clean_env(**env),
    )  # fmt: skip


def test_health_asks_the_service_at_its_own_listen_address(stack: Stack) -> None:
    port = stack.url.rsplit(":", 1)[1]
    # A wildcard listen address is asked on loopback, as in the container (0.0.0.0:8080).
    for args in ([], ["--ready"]):
        done = health(*args, ORCH_SERVER__LISTEN=f"0.0.0.0:{port}")
        assert done.returncode == 0 and not done.stdout and not done.stderr, done
    assert health("--url", f"{stack.url}/healthz").returncode == 0


def test_health_is_1_and_one_line_when_nothing_answers_200(stack: Stack) -> None:
    down = health(ORCH_SERVER__LISTEN=f"0.0.0.0:{free_port()}")
    assert down.returncode == 1 and "Traceback" not in down.stderr
    [line] = down.stderr.splitlines()
    assert line.startswith("orchestrator: http://127.0.0.1:") and "/healthz" in line
    missing = health("--url", f"{stack.url}/nothing-here")
    assert missing.returncode == 1 and missing.stderr.strip().endswith("answered 404")
