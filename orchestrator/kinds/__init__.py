"""Kind handlers: for each kind of tracked work, what to read and how to judge it.

A handler gets the tracking's state and its workspace's client and returns a
``Judgement``; the engine's one poll path decides and applies. Adding a kind is
a handler here and a line in ``handlers``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.kinds.schedule import ScheduleHandler
from orchestrator.kinds.status import StatusHandler

if TYPE_CHECKING:
    from orchestrator.kinds.base import KindHandler
    from orchestrator.platform.run_history import RunHistory


def handlers(history: RunHistory | None) -> dict[str, KindHandler]:
    """One handler per kind; ``history`` reads a finished function job's runs."""
    return {
        "function_job": StatusHandler("function_job", history),
        "net_operation_build": StatusHandler("net_operation_build"),
        "workspace_ui_build": StatusHandler("workspace_ui_build"),
        "schedule": ScheduleHandler(),
    }
