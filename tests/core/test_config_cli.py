"""Configuration loading and the serve command's start-up errors."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.config import load_settings
from orchestrator.errors import ConfigError


def test_embedded_defaults_match_the_contract() -> None:
    s = load_settings(None)
    assert s.server.listen == "127.0.0.1:8080"
    assert s.polling.initial_delay_s == 1.0 and s.polling.max_delay_s == 30.0
    assert s.workspaces[0].name == "default"
    assert s.workspaces[0].paths.function_job == "/api/workspace/functions/jobs/{id}"
    assert s.events.retry_schedule_s == [5, 30, 120, 600, 1800, 3600]


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[polling]\nmax_delay_s = 12.0\n[[workspaces]]\nname = "default"\n'
        'base_url = "http://127.0.0.1:1"\n'
    )
    monkeypatch.setenv("ORCH_POLLING__MAX_DELAY_S", "7")
    monkeypatch.setenv("WORKSPACE_API_BASE_URL", "http://127.0.0.1:5999/")
    s = load_settings(cfg)
    assert s.polling.max_delay_s == 7.0
    assert s.workspaces[0].base_url == "http://127.0.0.1:5999"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[polling]\nmax_delay_s = -1\n", "polling.max_delay_s"),
        ('[server]\nlisten = "nowhere"\n', "server.listen"),
        ("[polling]\nbogus = 1\n", "polling.bogus"),
        ("[polling]\nresume_readers = 2\n", "polling.resume_readers"),
        ('[[workspaces]]\nname = "default"\nbase_url = "ftp://x"\n', "workspaces.0.base_url"),
        (
            '[[workspaces]]\nname = "a"\n[workspaces.paths]\nfunction_job = "/jobs"\n',
            "workspaces.0.paths.function_job",
        ),
    ],
)
def test_bad_configuration_names_the_key(tmp_path: Path, text: str, key: str) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_settings(cfg)


PG_URL = "postgresql://orch@127.0.0.1:5432/orch"


def test_a_shorter_lease_alone_is_accepted_and_the_stall_lag_follows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Setting only store.lease_timeout_s once failed on polling.stall_lag_s, a key
    # the operator never set (issue #36).
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\nurl = "{PG_URL}"\nlease_timeout_s = 10\n')
    s = load_settings(cfg)
    assert 0 < s.polling.stall_lag_s < s.store.lease_timeout_s / 3
    monkeypatch.setenv("ORCH_STORE__LEASE_TIMEOUT_S", "2")
    s = load_settings(cfg)
    assert s.store.lease_timeout_s == 2 and 0 < s.polling.stall_lag_s < 2 / 3
    monkeypatch.delenv("ORCH_STORE__LEASE_TIMEOUT_S")
    # The default lease (30 s) keeps the 5 s it always had.
    assert load_settings(None).polling.stall_lag_s == 5
    assert load_settings(None, store={"url": PG_URL}).polling.stall_lag_s == 5


def test_a_stall_lag_set_too_long_for_the_lease_is_refused_naming_it(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\nurl = "{PG_URL}"\nlease_timeout_s = 10\n[polling]\nstall_lag_s = 4\n')
    proc = _cli("serve", "--config", str(cfg))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "polling.stall_lag_s: must be under store.lease_timeout_s / 3" in line
    cfg.write_text(f'[store]\nurl = "{PG_URL}"\nlease_timeout_s = 10\n[polling]\nstall_lag_s = 3\n')
    assert load_settings(cfg).polling.stall_lag_s == 3


def test_serve_with_bad_config_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[polling]\njitter = 5\n")
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "serve", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "polling.jitter" in lines[0]


def test_serve_with_missing_config_file(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "serve", "--config", str(tmp_path / "none.toml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "not found" in proc.stderr


@pytest.mark.parametrize("case", ["parent is a file", "store is a directory"])
def test_an_unwritable_store_is_one_line_naming_the_path_and_the_fix(
    tmp_path: Path, case: str
) -> None:
    # Root writes anywhere, so the tests make paths no one can use; the container
    # test (tests/container) has uid 10001 meet a root-owned /data.
    if case == "parent is a file":
        (tmp_path / "file").write_text("")
        store, named = tmp_path / "file" / "orch.db", tmp_path / "file"
    else:
        store = named = tmp_path / "orch.db"
        store.mkdir()
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[store]\npath = "{store}"\n'
        '[[workspaces]]\nname = "default"\nbase_url = "http://127.0.0.1:9"\n'
    )
    proc = _cli("serve", "--config", str(cfg))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("orchestrator: store.path: cannot write ") and str(named) in line
    assert "ORCH_STORE__PATH" in line and "fsGroup" in line


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_version() -> None:
    proc = _cli("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("orchestrator ")
    assert proc.stdout.split()[1][0].isdigit()


def test_an_unknown_simulator_profile_is_one_line_naming_the_choices() -> None:
    proc = _cli("simulate", "--profile", "nope")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "invalid choice: 'nope'" in proc.stderr and "'fast'" in proc.stderr
    assert "bench, chaos, default, fast" in _cli("simulate", "--help").stdout


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_a_port_in_use_is_one_line_naming_the_key(tmp_path: Path, taken_port: int) -> None:
    proc = _cli("simulate", "--listen", f"127.0.0.1:{taken_port}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "--listen" in line and str(taken_port) in line and "in use" in line

    cfg = tmp_path / "taken.toml"
    cfg.write_text(
        f'[server]\nlisten = "127.0.0.1:{taken_port}"\n[store]\npath = "{tmp_path / "o.db"}"\n'
        '[[workspaces]]\nname = "default"\nbase_url = "http://127.0.0.1:9"\n'
    )
    proc = _cli("serve", "--config", str(cfg))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "server.listen" in line and str(taken_port) in line and "in use" in line

    cfg.write_text(
        f'[store]\npath = "{tmp_path / "o2.db"}"\n'
        f'[[workspaces]]\nname = "default"\nbase_url = "http://127.0.0.1:{taken_port}"\n'
    )
    proc = _cli("serve", "--config", str(cfg), "--with-simulator")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "workspaces.default.base_url" in line and "in use" in line


def test_explain_to_an_unreachable_service_says_what_happened() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    proc = _cli("explain", "billing.sync-invoices", "--server", f"http://127.0.0.1:{port}")
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert f"cannot reach the service at http://127.0.0.1:{port}" in text
    assert "Connect" in text and "127.0.0.1" in text.split("cannot reach", 1)[1]


def test_the_example_file_is_the_settings_model_at_its_defaults() -> None:
    from orchestrator.config_example import NOTES, render

    example = Path(__file__).resolve().parents[2] / "config" / "orchestrator.example.toml"
    assert example.read_text() == render(), "regenerate: python -m orchestrator.config_example"
    # Every documented key is one the model has, and loading the file changes nothing.
    loaded = load_settings(example)
    assert loaded.model_dump() == load_settings(None).model_dump()
    for key in NOTES:
        assert f"{key.rsplit('.', 1)[1]} = " in render(), key
