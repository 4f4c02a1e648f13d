"""The ``sh`` and ``python`` examples of docs/*.md, run as written; and the
configuration page against the settings model.

Per page, the shell blocks run in order in one bash (as a reader types them in
one terminal) and the Python blocks in order in one ``python -m asyncio``-like
session (top-level ``await``, one namespace), each against its own live
``serve --with-simulator``. A block is skipped only when an HTML comment
``<!-- not run by the docs test: why -->`` stands right before it. Only the
ports change, as in the README test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from orchestrator.config import Settings, load_settings
from tests.newcomer.conftest import clean_env, for_ports, serve_with_simulator

DOCS = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(
    r"(<!-- not run by the docs test: ([^\n]*?) -->\n)?```(sh|python)\n(.*?)```", re.S
)
# What `python -m asyncio` does with each input: compile with top-level await
# allowed, run in one namespace, await what it returns.
SESSION = """
import ast, asyncio, inspect, json, sys

async def main():
    ns = {"__name__": "__main__"}
    for code in json.load(open(sys.argv[1])):
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        result = eval(compile(code, "<docs block>", "exec", flags=flags), ns)
        if inspect.iscoroutine(result):
            await result

asyncio.run(main())
"""


def blocks(page: Path) -> list[tuple[str | None, str, str]]:
    """(why it is not run or None, language, code) for each sh or python block."""
    return [(m.group(2), m.group(3), m.group(4)) for m in BLOCK.finditer(page.read_text())]


def sessions() -> list[tuple[str, str]]:
    """(page, language) for every page with runnable blocks of that language."""
    return sorted(
        {
            (page.name, language)
            for page in DOCS.glob("*.md")
            for why, language, _ in blocks(page)
            if why is None
        }
    )


def test_every_docs_block_runs_or_says_why_not() -> None:
    found = {page.name: blocks(page) for page in DOCS.glob("*.md")}
    skipped = [(name, why) for name, items in found.items() for why, _, _ in items if why]
    assert all(why.strip() for _, why in skipped)
    # Any other marker spelling would silently run nothing: there is none.
    for page in DOCS.glob("*.md"):
        assert page.read_text().count("<!-- not run") == sum(
            1 for why, _, _ in found[page.name] if why
        ), page.name
    assert ("api.md", "sh") in sessions() and ("api.md", "python") in sessions()
    assert ("simulator.md", "python") in sessions()


@pytest.mark.parametrize(("page", "language"), sessions())
def test_the_docs_examples_run_as_written(page: str, language: str, tmp_path: Path) -> None:
    codes = [code for why, lang, code in blocks(DOCS / page) if why is None and lang == language]
    with serve_with_simulator(tmp_path) as (port, sim_port):
        codes = [for_ports(code, port, sim_port) for code in codes]
        env = clean_env(ORCH_SERVER=f"http://127.0.0.1:{port}", COLUMNS="160")
        # `orchestrator` as a reader's activated venv has it.
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        if language == "sh":
            command = ["bash", "-euo", "pipefail", "-c", "\n".join(codes)]
        else:
            script = tmp_path / "blocks.json"
            script.write_text(json.dumps(codes))
            command = [sys.executable, "-c", SESSION, str(script)]
        done = subprocess.run(
            command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    if (page, language) == ("api.md", "sh"):
        # Each answer is the documented one, not a problem: the tracking round trip,
        # the CLI's wait, the feed.
        assert '"kind":"net_operation_build"' in done.stdout
        assert '"outcome":"abandoned"' in done.stdout
        assert "ended as succeeded" in done.stdout and '"events":[' in done.stdout
    if (page, language) == ("api.md", "python"):
        assert "422 remote_id" in done.stdout
        assert re.search(r"^\d+ com\.moltaro\.orchestrator\.tracking\.", done.stdout, re.M)


CONFIG_PAGE = DOCS / "configuration.md"
# A table's name where it starts: a heading or a paragraph opening with `[name]`
# or `[[name]]`; any other heading ends it.
TABLE_NAME = re.compile(r"^(?:#+ )?`\[\[?([\w.]+)\]\]?`")


@dataclass(frozen=True)
class Key:
    table: str  # dotted, as in the TOML file: "polling.adaptive", "workspaces.paths"
    name: str
    default: Any  # REQUIRED when the key has none
    env: str | None  # its own variable; None inside a list, set as a whole
    list_env: str | None  # the list's variable (JSON), for keys inside one


REQUIRED = object()


def _env_name(path: list[str]) -> str:
    """What pydantic-settings reads for a key: the prefix, the path joined by the delimiter."""
    config = Settings.model_config
    delimiter = config.get("env_nested_delimiter")
    assert delimiter, "without a delimiter no nested key has a variable of its own"
    return (str(config.get("env_prefix", "")) + delimiter.join(path)).upper()


def _models_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, itself or as the items of a list."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) is list:
        return _models_in(get_args(annotation)[0])
    if get_origin(annotation) in (Union, UnionType):  # a model or None
        return next(filter(None, map(_models_in, get_args(annotation))), None)
    return None


def settings_keys(
    model: type[BaseModel] = Settings, path: tuple[str, ...] = (), list_env: str | None = None
) -> Iterator[Key]:
    """Every leaf key of the settings model, through nested models and lists of them."""
    for name, field in model.model_fields.items():
        here = [*path, name]
        nested = _models_in(field.annotation)
        if nested is not None:
            in_list = get_origin(field.annotation) is list
            inner_env = _env_name(here) if in_list and list_env is None else list_env
            yield from settings_keys(nested, tuple(here), inner_env)
            continue
        default = REQUIRED if field.is_required() else field.get_default(call_default_factory=True)
        yield Key(".".join(path), name, default, None if list_env else _env_name(here), list_env)


def config_page_tables() -> dict[str, tuple[str, dict[str, tuple[str, str]]]]:
    """Per table: (its whole text, {key: (default cell, env cell)})."""
    lines: dict[str, list[str]] = {}
    current: str | None = None
    for line in CONFIG_PAGE.read_text().splitlines():
        named = TABLE_NAME.match(line)
        if named:
            current = named.group(1)
        elif line.startswith("#"):
            current = None
        if current is not None:
            lines.setdefault(current, []).append(line)
    tables = {}
    for table, text in lines.items():
        rows = [
            [c.strip() for c in ln.strip().strip("|").split("|")]
            for ln in text
            if ln.startswith("|")
        ]
        header, keys = (rows[0], rows[2:]) if rows else ([], [])
        default_col = header.index("default") if "default" in header else None
        env_col = next((i for i, h in enumerate(header) if h.startswith("env")), None)
        cells = {
            row[0].strip("`"): (
                row[default_col] if default_col is not None else "",
                row[env_col] if env_col is not None else "",
            )
            for row in keys
        }
        tables[table] = ("\n".join(text), cells)
    return tables


def _shows_default(cell: str, default: Any) -> bool:
    """The default cell names the model's default: its first `code` is the value."""
    if default is REQUIRED:
        return cell == "(required)"
    if default is None:
        return cell.lower().startswith("none")
    code = re.search(r"`([^`]*)`", cell)
    token = code.group(1) if code else cell
    try:
        shown = json.loads(token)
    except ValueError:
        shown = token  # a bare string, as the routes are shown
    return isinstance(shown, bool) is isinstance(default, bool) and shown == default


def test_the_configuration_page_documents_every_key_with_its_default_and_variable() -> None:
    tables = config_page_tables()
    problems = []
    for key in settings_keys():
        text, cells = tables.get(key.table, ("", {}))
        where = f"{key.table}.{key.name}"
        if key.name not in cells:
            problems.append(f"{where}: not in the [{key.table}] table")
            continue
        default_cell, env_cell = cells[key.name]
        if not _shows_default(default_cell, key.default):
            problems.append(f"{where}: default shown {default_cell!r}, the model's {key.default!r}")
        if key.env and f"`{key.env}`" not in env_cell:
            problems.append(f"{where}: variable {key.env} not shown (env cell {env_cell!r})")
        if key.list_env and f"`{key.list_env}`" not in text:
            problems.append(f"[{key.table}]: the list's variable {key.list_env} not named")
    assert not problems, "docs/configuration.md:\n" + "\n".join(dict.fromkeys(problems))


def test_the_variable_names_the_configuration_page_is_checked_against_are_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The names above come from the model's settings config: two are read as named.
    names = {f"{k.table}.{k.name}": k.env for k in settings_keys()}
    assert names["store.claim_batch"] == "ORCH_STORE__CLAIM_BATCH"
    monkeypatch.setenv(str(names["polling.adaptive.min_samples"]), "7")
    monkeypatch.setenv(str(names["server.replica_id"]), "r-1")
    s = load_settings(None)
    assert s.polling.adaptive.min_samples == 7 and s.server.replica_id == "r-1"
    assert names["workspaces.paths.function_job"] is None
