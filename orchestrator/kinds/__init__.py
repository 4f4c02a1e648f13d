"""Kind handlers: for each kind of tracked work, what to read and how to judge it.

A handler gets the tracking's state and its workspace's client and returns a
``Judgement``; the engine's one poll path decides and applies. Adding a kind is
a handler here and a line in ``handlers``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.kinds.found import FoundHandler
from orchestrator.kinds.schedule import ScheduleHandler
from orchestrator.kinds.status import StatusHandler

if TYPE_CHECKING:
    from orchestrator.kinds.base import KindHandler
    from orchestrator.platform.run_history import RunHistory


def handlers(history: RunHistory | None, filter_skew_s: float = 5.0) -> dict[str, KindHandler]:
    """One handler per kind; ``history`` reads a finished function job's runs;
    ``filter_skew_s`` is the default ``since`` of work found by filter, before the intake."""
    return {
        "function_job": StatusHandler("function_job", history),
        "net_operation_build": StatusHandler("net_operation_build"),
        "workspace_ui_build": StatusHandler("workspace_ui_build"),
        "schedule": ScheduleHandler(),
        "trigger_work": FoundHandler("trigger_work", filter_skew_s),
        "action_work": FoundHandler("action_work", filter_skew_s),
    }
