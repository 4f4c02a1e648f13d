"""``orchestrator group show|wait GROUP``: a group's progress on the command line.

Exit codes: 0 every member succeeded, 1 some did not, 3 the group's deadline
came first, 4 (``show``) not ended yet, 10 usage, connection or API trouble
(an unknown group included).
"""

from __future__ import annotations

import aiohttp
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from orchestrator.client.commands import EXIT_USAGE, _client, outcome_text, unreachable
from orchestrator.client.http import OrchestratorClient
from orchestrator.client.models import Group, OrchestratorApiError

EXIT_NOT_ENDED = 4
PROGRESS_S = 1.0  # the bar moves at least this often while members end


def exit_code(g: Group) -> int:
    if not g.ended:
        return EXIT_NOT_ENDED
    if g.state == "deadline_exceeded":
        return 3
    return 0 if g.all_succeeded else 1


def _outcomes(g: Group) -> str:
    shown = [f"{outcome_text(k)} {n}" for k, n in sorted(g.outcomes.items()) if n]
    return ", ".join(shown) or "none ended"


def _line(g: Group) -> str:
    return (
        f"group [bold]{g.group}[/]: {g.state}, {g.terminal}/{g.total} ended"
        + (" (sealed)" if g.sealed and not g.ended else "")
        + f"; {_outcomes(g)}"
    )


async def group_command(
    console: Console, *, action: str, name: str, server: str | None, timeout_s: float | None
) -> int:
    try:
        async with _client(server) as orch:
            if action == "show":
                found = await orch.group(name)
            else:
                found = await _follow(console, orch, name, timeout_s)
    except OrchestratorApiError as exc:
        console.print(
            f"[red]orchestrator: {exc}[/]" + (f" (field {exc.field})" if exc.field else "")
        )
        return EXIT_USAGE
    except TimeoutError:
        console.print(f"[red]orchestrator: group {name} did not end within {timeout_s:g} s[/]")
        return EXIT_NOT_ENDED
    except (aiohttp.ClientError, OSError) as exc:
        console.print(f"[red]orchestrator: {unreachable(server, exc)}[/]")
        return EXIT_USAGE
    console.print(_line(found), highlight=False)
    return exit_code(found)


async def _follow(
    console: Console, orch: OrchestratorClient, name: str, timeout_s: float | None
) -> Group:
    """The group until it ends, with a bar of its members that have ended."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(name, total=None)

        def changed(g: Group) -> None:
            progress.update(
                task, total=g.total or None, completed=g.terminal,
                description=f"{g.group} ({g.state}): {_outcomes(g)}",
            )  # fmt: skip

        return await orch.wait_group(
            name, timeout_s=timeout_s, progress_s=PROGRESS_S, on_change=changed
        )
