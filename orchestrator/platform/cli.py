"""``orchestrator explain FUNCTION_KEY``: the execution model of a function key.

Asks a running service (``--server``, else ``$ORCH_SERVER``, else
http://127.0.0.1:8080; token ``$ORCH_API_TOKEN``), or reads the workspace
itself with ``--workspace-url`` (token ``$WORKSPACE_API_TOKEN``). Exit codes:
0 answered, 1 the catalog has no such key, 2 bad arguments (a function key that
is not 1-200 characters of [A-Za-z0-9._:-]: nothing is asked), 3 the service or
workspace failed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any
from urllib.parse import quote

import orjson

from orchestrator.clock import SystemClock
from orchestrator.config import WorkspaceConfig
from orchestrator.platform.discovery import DiscoveryError, execution_model
from orchestrator.platform.execution_model import FUNCTION_KEY_RULE, valid_function_key
from orchestrator.transport import HttpTransport, TransportError
from orchestrator.workspace.client import workspace_client

DEFAULT_SERVER = "http://127.0.0.1:8080"
EXIT_UNKNOWN = 1
EXIT_USAGE = 2  # as argparse exits on bad arguments
EXIT_FAILED = 3
MAX_ANSWER_BYTES = 1024 * 1024
Fetched = tuple[int, dict[str, Any] | None, str | None]  # (exit code, answer, error message)


def add_explain_command(subparsers: Any) -> None:
    """Add ``explain`` to the ``orchestrator`` sub-commands."""
    p = subparsers.add_parser(
        "explain",
        help="the execution model of a function key (decision-table row, contradictions)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("function_key", metavar="FUNCTION_KEY")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--server", help="a running orchestrator service's URL")
    where.add_argument("--workspace-url", help="read the workspace directly at this base URL")
    p.add_argument("--workspace", default="default", help="workspace name (with --server)")
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    p.set_defaults(func=run_explain)


def run_explain(args: argparse.Namespace) -> int:
    code, answer, error = asyncio.run(fetch(args))
    if error is not None:
        print(f"orchestrator explain: {error}", file=sys.stderr)
    if answer is not None:
        print(
            orjson.dumps(answer, option=orjson.OPT_INDENT_2).decode()
            if args.json
            else render(answer)
        )
    return code


async def fetch(args: argparse.Namespace) -> Fetched:
    """The answer from the service or the workspace; nothing is asked with a key that is not one."""
    key: str = args.function_key
    if not valid_function_key(key):
        return EXIT_USAGE, None, f"FUNCTION_KEY {FUNCTION_KEY_RULE}"
    if args.workspace_url:
        return await _from_workspace(args.workspace_url, key)
    return await _from_server(args.server, args.workspace, key)


async def _from_workspace(url: str, key: str) -> Fetched:
    try:
        cfg = WorkspaceConfig(base_url=url)
    except ValueError as exc:
        return EXIT_FAILED, None, f"--workspace-url: {exc}"
    client = workspace_client(cfg, os.environ.get(cfg.token_env) or None, SystemClock())
    try:
        answer = await execution_model(client, key)
    except DiscoveryError as exc:
        return EXIT_FAILED, None, exc.failure.detail
    finally:
        await client.close()
    if answer is None:
        return EXIT_UNKNOWN, None, f"the Function Catalog has no function key {key}"
    return 0, answer, None


async def _from_server(server: str | None, workspace: str, key: str) -> Fetched:
    base = (server or os.environ.get("ORCH_SERVER") or DEFAULT_SERVER).rstrip("/")
    headers = {"Accept": "application/json"}
    token = os.environ.get("ORCH_API_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    url = f"{base}/v1/functions/{quote(key, safe='')}/execution-model"
    url += "?workspace=" + quote(workspace, safe="")
    transport = HttpTransport(max_connections=1, max_response_bytes=MAX_ANSWER_BYTES)
    try:
        answer = await transport.send("GET", url, headers, None, 30.0)
        body = orjson.loads(answer.body)
    except (TimeoutError, TransportError, ValueError) as exc:
        reason = str(exc) or type(exc).__name__
        return EXIT_FAILED, None, f"cannot reach the service at {base}: {reason}"
    finally:
        await transport.close()
    if answer.status == 200 and isinstance(body, dict):
        return 0, body, None
    detail = body.get("detail") if isinstance(body, dict) else None
    message = f"HTTP {answer.status}" + (f": {detail}" if detail else "")
    return (EXIT_UNKNOWN if answer.status == 404 else EXIT_FAILED), None, message


def render(answer: dict[str, Any]) -> str:
    """A short human reading of an execution-model answer."""
    lines = [
        f"{answer.get('function_key')} ({answer.get('business_function_id')}): "
        f"{answer.get('scope') or '?'} {answer.get('contract') or '?'} contract, "
        f"revision {answer.get('revision')}",
    ]
    for row in answer.get("rows") or []:
        lines.append(f"  {row['surface']}: {row['execution_model']} - {row['description']}")
        lines.append(f"    completion evidence: {row['completion_evidence']}")
        if row.get("tracking_kind"):
            fields = ", ".join(row.get("tracking_fields") or [])
            lines.append(
                f"    track with kind: {row['tracking_kind']}" + (f" ({fields})" if fields else "")
            )
    if not answer.get("rows"):
        lines.append("  no row of the decision table applies")
    pub = answer.get("publication")
    if pub is None:
        lines.append("  API publication: none (the key is not callable through the API)")
    else:
        state = "callable" if pub["callable"] else "NOT callable"
        lines.append(
            f"  API publication: {pub['kind']} ({state}; enabled={pub['is_enabled']}, "
            f"retired={pub['is_retired']})"
        )
    for sch in answer.get("schedules") or []:
        lines.append(
            f"  schedule {sch['schedule_id']}: {sch['status']}, next {sch['next_run_at']}, "
            f"last {sch['last_status']}, target {sch['target_health']}"
        )
    for flag in answer.get("contradictions") or []:
        lines.append(f"  ! {flag['code']}: {flag['detail']}")
    fallback = [n for n, e in (answer.get("enums") or {}).items() if e.get("source") == "fallback"]
    if fallback:
        lines.append(f"  enums from the documented fallback: {', '.join(fallback)}")
    return "\n".join(lines)
