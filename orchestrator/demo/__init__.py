"""``orchestrator demo``: see the orchestrator work in under a minute.

    run_demo(count=300, seed=None, live=True) -> exit code

Starts the bundled simulator, a real ``orchestrator serve`` and a signature-
checking event sink; creates ``count`` jobs and builds with a realistic mix;
tracks them through the batch intake; shows progress; prints a summary.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys

from rich.console import Console

from orchestrator.demo.run import Demo

__all__ = ["run_demo"]


def run_demo(count: int = 300, seed: int | None = None, live: bool = True) -> int:
    # soft_wrap: a long line is never cut into two mid-phrase; a narrow terminal
    # folds it where it must.
    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        # Piped or captured: tables as wide as they need, not 80 columns.
        console = Console(highlight=False, width=120, soft_wrap=True)
    live = live and console.is_terminal
    demo = Demo(console, count, seed, live)

    terminated: list[bool] = []

    async def main() -> int:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()

        def on_sigterm() -> None:
            # Cancel like Ctrl-C does, so that the same clean-up runs.
            terminated.append(True)
            if task is not None:
                task.cancel()

        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
        try:
            return await demo.run()
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    from orchestrator.aio import run_async

    try:
        return run_async(main)
    except (KeyboardInterrupt, asyncio.CancelledError):
        console.print("demo interrupted: every process it started has been stopped")
        return 143 if terminated else 130
    except Exception as exc:
        console.print(f"[red]demo failed: {exc}[/]")
        return 1
    finally:
        # If the loop died before its own clean-up ran, do not leave the service behind.
        if demo.serve is not None:
            demo.serve.kill_now()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
