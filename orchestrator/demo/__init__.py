"""``orchestrator demo``: see the orchestrator work in under a minute.

    run_demo(count=300, seed=None, live=True) -> exit code

Starts the bundled simulator, a real ``orchestrator serve`` and a signature-
checking event sink; creates ``count`` jobs and builds with a realistic mix;
tracks them through the batch intake; shows progress; prints a summary.
"""

from orchestrator.demo.run import run_demo

__all__ = ["run_demo"]
