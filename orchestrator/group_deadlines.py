"""The groups' deadlines: a named background task of the service.

Every ``CHECK_S`` it ends the groups whose deadline has passed, when the soonest
deadline it knows of has come: its own seals' at once, the store's as of its last
look (every ``ASK_EVERY`` checks), so a replica with no deadline due writes
nothing and reads the store only then. On several replicas each runs it; a group
whose sealing replica stopped is ended by another within ``ASK_EVERY`` checks, and
the store's ``outcome IS NULL`` guard lets exactly one end each group.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from orchestrator.aio import wait_event
from orchestrator.errors import StoreError

if TYPE_CHECKING:
    import asyncio

    from orchestrator.metrics import Metrics
    from orchestrator.tracker import Tracker

log = logging.getLogger("orchestrator.groups")

CHECK_S = 1.0  # a group deadline is seen within this of passing
ASK_EVERY = 15  # checks between two looks at the store (the open groups gauge too)


async def run_group_deadlines(
    tracker: Tracker, published: Callable[[], None], stop: asyncio.Event, metrics: Metrics
) -> None:
    checks = 0
    while not await wait_event(stop, CHECK_S):
        try:
            ask = checks % ASK_EVERY == 0
            if ask:
                metrics.groups_open.set(await tracker.count_open_groups())
            checks += 1
            ended = await tracker.expire_groups(ask)
        except StoreError as exc:
            log.warning("group deadlines not checked: %s", exc)
            continue
        for group in ended:
            log.info(
                "group deadline exceeded",
                extra={"fields": {"group": group.name, "open": group.members - group.ended}},
            )
        if ended:
            published()  # their events: feed, SSE and deliveries read them now
