"""The composition root's bag of dependencies, shared by the API handlers.

Handlers read it as ``request.app[RUNTIME]``. Everything in it is created by
``orchestrator.service`` at start-up (never at import time) and passed in. The
tracking routes reach the engine only through ``tracker``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from orchestrator.clock import Clock
    from orchestrator.config import Settings
    from orchestrator.engine.engine import LoadProgress
    from orchestrator.engine.replica import Replica
    from orchestrator.events.bus import EventBus
    from orchestrator.events.delivery import DeliveryService
    from orchestrator.metrics import Metrics
    from orchestrator.store.base import Store
    from orchestrator.tracker import Tracker


@dataclass
class Runtime:
    settings: Settings
    store: Store
    clock: Clock
    metrics: Metrics
    bus: EventBus
    api_tokens: frozenset[str] = frozenset()
    # Both set by the service; a test app that mounts only the event routes has neither.
    tracker: Tracker | None = None
    deliveries: DeliveryService | None = None
    replica: Replica | None = None  # its leases and peers, for /readyz
    # The start-up load of the active trackings (None: nothing to load, as in tests).
    loading: LoadProgress | None = None
    draining: bool = False
    failed_tasks: list[str] = field(default_factory=list)


RUNTIME: web.AppKey[Runtime] = web.AppKey("runtime", Runtime)
