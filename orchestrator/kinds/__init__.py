"""Kind handlers: for each kind of tracked work, what to read and how to judge it.

A handler gets the tracking's state and its workspace's client and returns a
``Judgement``; the engine's one poll path decides and applies. A kind is declared
once, in ``vocabulary.KINDS`` (its family, route, enums and class hint); its
family says which handler serves it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.kinds.found import FoundHandler
from orchestrator.kinds.schedule import ScheduleHandler
from orchestrator.kinds.status import StatusHandler
from orchestrator.vocabulary import KINDS

if TYPE_CHECKING:
    from orchestrator.kinds.base import KindHandler
    from orchestrator.platform.run_history import RunHistory


def handlers(history: RunHistory | None, filter_skew_s: float = 5.0) -> dict[str, KindHandler]:
    """One handler per kind; ``history`` reads a finished function job's runs;
    ``filter_skew_s`` is the default ``since`` of work found by filter, before the intake."""
    made: dict[str, KindHandler] = {}
    for kind, spec in KINDS.items():
        if spec.family == "status":
            # A function job's runs go into its result; a build's Failure is its body's.
            made[kind] = StatusHandler(kind, history if spec.run_history else None)
        elif spec.family == "schedule":
            made[kind] = ScheduleHandler()
        else:
            made[kind] = FoundHandler(kind, filter_skew_s)
    return made
