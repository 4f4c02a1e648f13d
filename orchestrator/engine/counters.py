"""Poll counters kept current in the store a few seconds behind the engine.

A read that changes nothing is not written when it is made (``decision.py``):
its counters (``polls``, ``last_polled_at``, ``next_poll_at``) live in the entry.
Each such entry is noted here, once however often it is read, and every
``CHECKPOINT_S`` the noted ones are written as plain poll results through the
engine's one write path, behind whatever was sent before them. So the store
is never more than one interval (and the write in flight) behind, and a
shutdown writes only the entries read since the last checkpoint, not every
active tracking: stopping takes as long at a million trackings as at ten.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import anyio

from orchestrator.engine.entry import Entry
from orchestrator.engine.writer import EngineWriter

# A SIGKILL loses at most the counters of reads made within this (docs/operations.md).
# Each checkpoint rewrites the row of every tracking read since the last: at 5 s,
# where a tracking is read every few seconds, that was a row write per read.
CHECKPOINT_S = 30.0
# Entries sent between two turns of the loop: a checkpoint of a large book goes out
# in small steps, between reads, rather than holding the loop for it at once.
_TURN = 500


class UnsavedCounters:
    def __init__(
        self,
        writer: EngineWriter,
        entries: Mapping[str, Entry],
        to_wall: Callable[[], float],
    ) -> None:
        self._writer = writer
        self._entries = entries  # the book's: an entry no longer in it has ended
        self._to_wall = to_wall  # wall minus monotonic time, now
        self._unsaved: dict[str, Entry] = {}

    def __len__(self) -> int:
        return len(self._unsaved)

    def read(self, entry: Entry) -> None:
        """A read whose counters were not written."""
        self._unsaved[entry.tracking_id] = entry

    def written(self, entry: Entry) -> None:
        """A read whose poll result, counters included, went to the writer."""
        self._unsaved.pop(entry.tracking_id, None)

    async def flush(self) -> int:
        """Send every noted entry's counters to the writer; how many were sent."""
        unsaved, self._unsaved = self._unsaved, {}
        offset = self._to_wall()
        sent = 0
        for tracking_id, entry in unsaved.items():
            polled_at = entry.state.last_polled_at
            if polled_at is None or self._entries.get(tracking_id) is not entry:
                continue  # never read, or ended (its terminal write carries its counters)
            self._writer.add(entry.update(polled_at, None, False, entry.due + offset))
            sent += 1
            if sent % _TURN == 0:
                await asyncio.sleep(0)
        return sent

    async def run(self, stop: asyncio.Event, every_s: float = CHECKPOINT_S) -> None:
        """Flush every ``every_s`` until ``stop``; the engine's stop flushes the rest."""
        while not stop.is_set():
            with anyio.move_on_after(every_s):
                await stop.wait()
            if not stop.is_set():
                await self.flush()
