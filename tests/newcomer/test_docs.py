"""The ``sh`` and ``python`` examples of docs/*.md, run as written.

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
from pathlib import Path

import pytest

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
