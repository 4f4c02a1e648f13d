"""The dashboard and the rules, checked by a real Prometheus against a real service.

promtool checks the rule and scrape files and lints a live ``/metrics``; then a
Prometheus on loopback scrapes an ``orchestrator serve`` subprocess that tracks
simulator work, and every dashboard panel expression and every rule expression
is evaluated through Prometheus's HTTP API. Debian's ``prometheus`` package
provides both binaries (``scripts/install-prometheus.sh``): under CI a missing
binary fails the test; elsewhere it is a skip that says why.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from orchestrator.metrics import Metrics

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RULES_DIR = REPO / "config" / "prometheus" / "rules"
RULE_TESTS_DIR = REPO / "config" / "prometheus" / "tests"
SCRAPE_CONFIG = REPO / "config" / "prometheus" / "prometheus.yml"
DASHBOARD = REPO / "config" / "grafana" / "dashboards" / "orchestrator.json"
PROVISIONING = REPO / "config" / "grafana" / "provisioning"

# Grafana's built-in and template variables, as a Grafana with "All" selected sends them.
SUBSTITUTIONS = {
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "5m",
    "${datasource}": "prometheus",
    "$datasource": "prometheus",
    "$workspace": ".*",
    "$kind": ".*",
}
# Panels that must show data once trackings have run (polls, trackings, outcomes).
MUST_HAVE_DATA = (
    "Poll rate by result",
    "Poll latency quantiles",
    "Active trackings",
    "Trackings created",
    "Outcomes over time",
    "Time to terminal quantiles",
    "Workspace up",
    # A single replica on SQLite reports these too (its own leases, one peer, store up).
    "Leases per replica",
    "Live peers",
    "Store up",
    # The process row: prometheus-client's collectors and the start-up load.
    "Resident memory",
    "CPU",
    "Open files",
    "Start-up loading",
)
# The replicas row: each of contract section 9's metrics, per scraped replica.
REPLICA_PANELS = {
    "Leases per replica": "orchestrator_replica_leases",
    "Live peers": "orchestrator_replica_peers",
    "Lease takeovers": "orchestrator_lease_takeovers_total",
    "Store up": "orchestrator_store_up",
    "Store listener up": "orchestrator_store_listener_up",
    "Lease hand-overs": "orchestrator_lease_handovers_total",
    "Leases lost by reason": "orchestrator_leases_lost_total",
}
# Of those, the rates must also be non-zero over the evaluated window.
MUST_BE_NON_ZERO = ("Poll rate by result", "Trackings created", "Outcomes over time")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is not None:
        return path
    reason = f"{name} is not installed: run scripts/install-prometheus.sh (Debian package)"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def _run(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, input=stdin, capture_output=True, text=True, timeout=60, check=False, cwd=REPO
    )


# ---------------------------------------------------------------- static checks


def test_promtool_checks_the_rule_files() -> None:
    promtool = _tool("promtool")
    files = sorted(str(p) for p in RULES_DIR.glob("*.yml"))
    assert files
    done = _run([promtool, "check", "rules", *files])
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_unit_tests_of_the_alert_rules_pass() -> None:
    promtool = _tool("promtool")
    files = sorted(str(p) for p in RULE_TESTS_DIR.glob("*.yml"))
    assert files
    done = _run([promtool, "test", "rules", *files])
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_checks_the_scrape_config(tmp_path: Path) -> None:
    promtool = _tool("promtool")
    # The config names its rule files relative to itself: check a copy laid out the same way.
    shutil.copy(SCRAPE_CONFIG, tmp_path / "prometheus.yml")
    shutil.copytree(RULES_DIR, tmp_path / "rules")
    done = _run([promtool, "check", "config", str(tmp_path / "prometheus.yml")])
    assert done.returncode == 0, done.stdout + done.stderr
    config = yaml.safe_load(SCRAPE_CONFIG.read_text())
    [job] = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == ["127.0.0.1:8080"]


def _panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # collapsed rows nest theirs


def _panel_exprs(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (panel["title"], target["expr"])
        for panel in _panels(dashboard)
        for target in panel.get("targets", [])
        if target.get("expr")
    ]


def test_dashboard_takes_its_datasource_from_a_variable() -> None:
    text = DASHBOARD.read_text()
    dashboard = json.loads(text)
    assert "__inputs" not in dashboard
    assert "${DS_" not in text
    [ds_var] = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert ds_var["name"] == "datasource" and ds_var["query"] == "prometheus"
    ids = [p["id"] for p in _panels(dashboard)]
    assert len(ids) == len(set(ids))
    for panel in _panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
    titles = {title for title, _ in _panel_exprs(dashboard)}
    assert set(MUST_HAVE_DATA) <= titles


def test_dashboard_has_a_replicas_row_beside_the_other_rows() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]
    rows = [p["title"] for p in panels if p["type"] == "row"]
    assert rows[:6] == [
        "Overview",
        "Polling (rate, errors, duration)",
        "Saturation",
        "Trackings",
        "Events",
        "Moltaro contract",
    ]
    start = next(i for i, p in enumerate(panels) if p["title"].startswith("Replicas"))
    below = panels[start + 1 :]
    assert {p["title"] for p in below} == set(REPLICA_PANELS)
    names = {m.name for m in Metrics().registry.collect()}
    for panel in below:
        [target] = panel["targets"]
        metric = REPLICA_PANELS[panel["title"]]
        # Per scraped replica (and, where a reason tells churn from trouble, by it).
        by_instance = re.search(r"by \(instance[,)]", target["expr"])
        assert metric in target["expr"] and by_instance, panel["title"]
        assert metric.removesuffix("_total") in names, metric
    # Nothing overlaps: the new row sits below every earlier panel.
    bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels[:start])
    assert panels[start]["gridPos"]["y"] >= bottom


def test_grafana_provisioning_files_point_at_the_dashboard() -> None:
    [provider] = yaml.safe_load((PROVISIONING / "dashboards" / "orchestrator.yaml").read_text())[
        "providers"
    ]
    assert provider["type"] == "file" and provider["options"]["path"]
    [source] = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yaml").read_text())[
        "datasources"
    ]
    assert source["type"] == "prometheus"


# ---------------------------------------------------------------- the live stack


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _Process:
    """A subprocess whose output goes to a file, stopped (TERM, then KILL) in teardown."""

    def __init__(self, name: str, args: list[str], log_dir: Path, env: dict[str, str]) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            args, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=REPO
        )

    def tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return f"--- {self.name} (exit {self.proc.poll()}) ---\n" + "\n".join(text[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()


def _wait_http(url: str, proc: _Process, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.proc.poll() is not None:
            pytest.fail(f"{proc.name} exited early\n{proc.tail()}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as response:
            if response.status == 200:
                return
        time.sleep(0.2)
    pytest.fail(f"{proc.name} did not answer {url} within {timeout_s} s\n{proc.tail()}")


def _wait_first_scrape(base: str, proc: _Process, timeout_s: float = 30.0) -> None:
    query = urllib.parse.urlencode({"query": 'up{job="orchestrator"} == 1'})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"{base}/api/v1/query?{query}", timeout=2) as response,
        ):
            if json.loads(response.read())["data"]["result"]:
                return
        time.sleep(0.25)
    pytest.fail(f"Prometheus never scraped the service within {timeout_s} s\n{proc.tail()}")


class _Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class Stack:
    sim: str
    api: str
    prometheus: str
    token: str
    secrets: tuple[str, ...]
    processes: tuple[_Process, ...]

    def tails(self) -> str:
        return "\n".join(p.tail() for p in self.processes)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus = _tool("prometheus")
    _tool("promtool")
    tmp = tmp_path_factory.mktemp("stack")
    token = "tok-" + secrets.token_hex(16)
    sink_secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    ws_token = "ws-" + secrets.token_hex(16)
    env = {
        **os.environ,
        "ORCH_API_TOKENS": token,
        "ORCH_SINK_SECRET": sink_secret,
        "WORKSPACE_API_TOKEN": ws_token,
        "PYTHONUNBUFFERED": "1",
    }
    for key in [k for k in env if k.startswith("ORCH_") and "__" in k] + ["ORCH_CONFIG"]:
        env.pop(key, None)
    env.pop("WORKSPACE_API_BASE_URL", None)
    sim_port, api_port, prom_port = _free_port(), _free_port(), _free_port()

    with contextlib.ExitStack() as cleanup:
        sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
        sink_thread = threading.Thread(target=sink.serve_forever, name="sink", daemon=True)
        sink_thread.start()
        cleanup.callback(sink_thread.join, 10)
        cleanup.callback(sink.server_close)
        cleanup.callback(sink.shutdown)

        python = sys.executable
        sim = _Process(
            "simulator",
            [
                *(python, "-m", "orchestrator", "simulate"),
                *("--listen", f"127.0.0.1:{sim_port}", "--profile", "fast", "--seed", "7"),
            ],
            tmp,
            env,
        )
        cleanup.callback(sim.stop)
        _wait_http(f"http://127.0.0.1:{sim_port}/_sim/stats", sim)

        config = tmp / "orchestrator.toml"
        config.write_text(
            f"""
[server]
listen = "127.0.0.1:{api_port}"
[store]
path = "{tmp / "orchestrator.db"}"
synchronous = "NORMAL"
[polling]
initial_delay_s = 0.2
max_delay_s = 1.0
not_found_min_s = 1
[[workspaces]]
name = "default"
base_url = "http://127.0.0.1:{sim_port}"
max_in_flight = 64
max_requests_per_second = 2000
[events]
retry_schedule_s = [0.5, 1.0]
[[events.sinks]]
name = "default"
url = "http://127.0.0.1:{sink.server_address[1]}/hooks"
secret_env = "ORCH_SINK_SECRET"
[logging]
format = "json"
level = "INFO"
"""
        )
        serve = _Process(
            "serve", [python, "-m", "orchestrator", "serve", "--config", str(config)], tmp, env
        )
        cleanup.callback(serve.stop)
        _wait_http(f"http://127.0.0.1:{api_port}/readyz", serve)

        prom_config = tmp / "prometheus.yml"
        prom_config.write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(p) for p in sorted(RULES_DIR.glob("*.yml"))],
                    "scrape_configs": [
                        {
                            "job_name": "orchestrator",
                            "metrics_path": "/metrics",
                            "scrape_interval": "1s",
                            "scrape_timeout": "1s",
                            "static_configs": [{"targets": [f"127.0.0.1:{api_port}"]}],
                        }
                    ],
                }
            )
        )
        prom = _Process(
            "prometheus",
            [
                prometheus,
                f"--config.file={prom_config}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
                "--storage.tsdb.retention.time=1h",
            ],
            tmp,
            env,
        )
        cleanup.callback(prom.stop)
        _wait_http(f"http://127.0.0.1:{prom_port}/-/ready", prom)
        # Target discovery takes a few seconds: scrapes must predate the work,
        # or every rate over it would be zero.
        _wait_first_scrape(f"http://127.0.0.1:{prom_port}", prom)

        yield Stack(
            sim=f"http://127.0.0.1:{sim_port}",
            api=f"http://127.0.0.1:{api_port}",
            prometheus=f"http://127.0.0.1:{prom_port}",
            token=token,
            secrets=(token, sink_secret, sink_secret.removeprefix("whsec_"), ws_token),
            processes=(sim, serve, prom),
        )


# Scripted timelines: every terminal outcome the engine can reach quickly.
def _script(kind: str, n: int, remote_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A simulator script and the matching intake body."""
    variant = n % 10
    intake: dict[str, Any] = {"kind": kind, "remote_id": remote_id, "labels": {"suite": "obs"}}
    if kind == "function_job":
        steps: list[dict[str, Any]] = [
            {"after_s": 0.0, "status": "Queued"},
            {"after_s": 0.2, "status": "Leased"},
        ]
        if variant == 9:  # never finishes: ends at its own deadline
            intake["timeout_s"] = 2.0
        elif variant == 8:
            steps.append({"after_s": 0.6, "status": "Failed", "last_error": "boom"})
        else:
            steps.append(
                {
                    "after_s": 0.6,
                    "status": "Completed",
                    "run": {"Status": "Success", "ResultSummary": f"{n} rows"},
                }
            )
    else:
        steps = [
            {"after_s": 0.0, "status": "Queued"},
            {"after_s": 0.2, "status": "Running"},
            {"after_s": 0.6, "status": "Failed" if variant == 8 else "Succeeded"},
        ]
    return {"kind": kind, "id": remote_id, "steps": steps}, intake


async def _track(session: aiohttp.ClientSession, stack: Stack, count: int, prefix: str) -> set[str]:
    """Script ``count`` remote operations and track them all; the ids involved."""
    kinds = ("function_job", "function_job", "net_operation_build", "workspace_ui_build")
    scripts = [
        _script(kinds[n % 4], n, f"{prefix}-{n:05d}-{secrets.token_hex(4)}") for n in range(count)
    ]
    gate = asyncio.Semaphore(32)

    async def create(script: dict[str, Any]) -> None:
        async with gate, session.post(f"{stack.sim}/_sim/script", json=script) as response:
            assert response.status == 201, await response.text()

    await asyncio.wait_for(asyncio.gather(*(create(s) for s, _ in scripts)), 90)
    ids = {s["id"] for s, _ in scripts}
    headers = {"Authorization": f"Bearer {stack.token}"}
    for start in range(0, count, 1000):
        items = [intake for _, intake in scripts[start : start + 1000]]
        async with session.post(
            f"{stack.api}/v1/trackings/batch", json={"items": items}, headers=headers
        ) as response:
            assert response.status == 200, await response.text()
            body = await response.json()
        for item in body["items"]:
            assert item["status"] == 201, item
            ids.add(item["tracking"]["tracking_id"])
    return ids


async def _metrics_text(session: aiohttp.ClientSession, stack: Stack) -> str:
    async with session.get(f"{stack.api}/metrics") as response:
        assert response.status == 200
        return await response.text()


def _sum(text: str, name: str) -> float:
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    )


async def _wait_terminal(
    session: aiohttp.ClientSession, stack: Stack, at_least: float, timeout_s: float
) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        text = await _metrics_text(session, stack)
        done = _sum(text, "orchestrator_trackings_terminal_total")
        if done >= at_least:
            return text
        if time.monotonic() > deadline:
            pytest.fail(f"only {done} of {at_least} trackings terminal\n{stack.tails()}")
        await asyncio.sleep(0.5)


async def _query(
    session: aiohttp.ClientSession, stack: Stack, expr: str, name: str = ""
) -> list[dict[str, Any]]:
    async with session.get(f"{stack.prometheus}/api/v1/query", params={"query": expr}) as response:
        body = await response.json()
    assert body.get("status") == "success", f"{name}: {expr}\n{body}"
    assert body["data"]["resultType"] == "vector", f"{name}: {expr}"
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


async def _wait_for(
    check: Callable[[], Awaitable[bool]], what: str, stack: Stack, timeout_s: float = 30.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}\n{stack.tails()}")
        await asyncio.sleep(0.5)


def _substitute(expr: str) -> str:
    for variable, value in SUBSTITUTIONS.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unknown variable in {expr}"
    return expr


def _rule_exprs() -> list[tuple[str, str]]:
    out = []
    for path in sorted(RULES_DIR.glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                out.append((rule.get("alert") or rule["record"], rule["expr"]))
    return out


@pytest.mark.timeout(240)
async def test_every_panel_and_rule_evaluates_against_live_metrics(stack: Stack) -> None:
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        ids = await _track(session, stack, 400, "obs")
        text = await _wait_terminal(session, stack, at_least=360, timeout_s=90)

        done = _run([_tool("promtool"), "check", "metrics"], stdin=text)
        assert done.returncode == 0, done.stdout + done.stderr
        # The process collectors, on the service's own registry.
        for name in ("process_resident_memory_bytes", "process_cpu_seconds_total"):
            assert _sum(text, name) > 0, name
        assert _sum(text, "process_open_fds") >= 3
        assert _sum(text, "orchestrator_resume_loaded") == _sum(
            text, "orchestrator_resume_expected"
        )

        # Prometheus has scraped the finished work, and at least one rate window's worth.
        terminal = _sum(text, "orchestrator_trackings_terminal_total")

        async def scraped() -> bool:
            rows = await _query(session, stack, "sum(orchestrator_trackings_terminal_total)")
            return bool(rows) and float(rows[0]["value"][1]) >= terminal

        await _wait_for(scraped, "Prometheus to scrape the terminal counts", stack)

        async def enough_scrapes() -> bool:
            # rate() over 1m needs two samples; a few more make the window meaningful.
            rows = await _query(session, stack, 'count_over_time(up{job="orchestrator"}[1m])')
            return bool(rows) and float(rows[0]["value"][1]) >= 5

        await _wait_for(enough_scrapes, "five scrapes within a minute", stack)
        up = await _query(session, stack, "up")
        assert [float(r["value"][1]) for r in up] == [1.0], up

        dashboard = json.loads(DASHBOARD.read_text())
        empty, zero = [], []
        for title, raw in _panel_exprs(dashboard):
            rows = await _query(session, stack, _substitute(raw), title)
            if not rows:
                empty.append(title)
            elif not any(float(r["value"][1]) > 0 for r in rows):
                zero.append(title)
        assert not [t for t in MUST_HAVE_DATA if t in empty], (empty, zero)
        assert not [t for t in MUST_BE_NON_ZERO if t in empty or t in zero], (empty, zero)

        for variable in ("workspace", "kind"):
            async with session.get(
                f"{stack.prometheus}/api/v1/label/{variable}/values",
                params={"match[]": "orchestrator_trackings_active"},
            ) as response:
                values = (await response.json())["data"]
            assert values, variable
        for name, expr in _rule_exprs():
            await _query(session, stack, expr, name)

        # Prometheus itself ran every rule without an error.
        async with session.get(f"{stack.prometheus}/api/v1/rules") as response:
            groups = (await response.json())["data"]["groups"]
        errors = [
            (r["name"], r.get("lastError"))
            for g in groups
            for r in g["rules"]
            if r.get("health") == "err"
        ]
        assert errors == []
        assert len([r for g in groups for r in g["rules"]]) == len(_rule_exprs())
    assert len(ids) == 800


def _serve_log(stack: Stack) -> str:
    return next(p for p in stack.processes if p.name == "serve").log_path.read_text(
        errors="replace"
    )


@pytest.mark.timeout(240)
async def test_no_label_value_is_ever_an_id_after_thousands_of_trackings(stack: Stack) -> None:
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        before = _sum(await _metrics_text(session, stack), "orchestrator_trackings_terminal_total")
        ids = await _track(session, stack, 3000, "ids")
        text = await _wait_terminal(session, stack, at_least=before + 2700, timeout_s=150)

    values: set[str] = set()
    series = 0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            series += 1
            values.update(sample.labels.values())
    leaks = sorted(v for v in values if any(i in v for i in ids))
    assert leaks == []
    assert not any(re.search(r"trk_[0-9a-f]{8}", v) for v in values)
    # Per-id series would mean thousands; ours are bounded by workspaces x kinds x enums.
    assert series < 2000, series

    log = _serve_log(stack)
    assert log, "the service wrote no log at all"
    for secret in stack.secrets:
        assert secret not in log
