"""The groups' deadlines: a named background task of the service.

Every ``CHECK_S`` it asks the store to end the groups whose deadline has passed
(one indexed statement; nothing when none is due). On several replicas each runs
it, and the store's ``outcome IS NULL`` guard lets exactly one end each group.
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
COUNT_EVERY = 15  # checks between two counts of the open groups (a gauge)


async def run_group_deadlines(
    tracker: Tracker, published: Callable[[], None], stop: asyncio.Event, metrics: Metrics
) -> None:
    checks = 0
    while not await wait_event(stop, CHECK_S):
        try:
            if checks % COUNT_EVERY == 0:
                metrics.groups_open.set(await tracker.count_open_groups())
            checks += 1
            ended = await tracker.expire_groups()
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
