"""A restart's first reads, planned from the counts of active trackings.

Every active tracking is owed a first read, spread over the longer of the initial
delay and the time the workspace's rate limit needs for all of them, so a restart
never bursts above the limit (``orchestrator_resume_pending`` counts those not read
yet). They are placed in the order the rows are loaded: the first loaded are due first.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.config import PollingConfig


class ResumePlan:
    __slots__ = ("count", "placed", "seeded", "window")

    def __init__(self, count: int, window: float, seeded: float) -> None:
        self.count = count
        self.window = window
        self.seeded = seeded  # the backoff step a resumed tracking starts from
        self.placed = 0

    def place(self, rng: random.Random) -> float:
        """Seconds from the start of the resume to this tracking's first read."""
        offset = self.window * (self.placed + rng.random()) / self.count
        self.placed += 1
        return offset


def plan_resume(
    counts: Mapping[str, int], rates: Mapping[str, float], p: PollingConfig
) -> dict[str, ResumePlan]:
    """One plan per configured workspace with active trackings."""
    plans = {}
    for ws, n in counts.items():
        if ws in rates and n > 0:
            window = max(p.initial_delay_s, n / rates[ws])
            # Unless its first read finds a change, a resumed tracking is read
            # again no sooner than one window later, even with the jitter's
            # shortest draw: re-reads then never crowd out first reads.
            soonest = p.multiplier * (1.0 - p.jitter)
            seeded = min(p.max_delay_s, max(p.initial_delay_s, window / soonest))
            plans[ws] = ResumePlan(n, window, seeded)
    return plans
