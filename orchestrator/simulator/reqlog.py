"""Per-id request log, one timeline of every request, and per-route counters.

Each is bounded and cheap to append to. A request that names the replica that
sent it (``X-Orchestrator-Replica``) is logged with it: which of several
orchestrator replicas read which job, and when.
"""

from __future__ import annotations

from collections import deque
from typing import Any

PER_ID = 10_000
MAX_IDS = 200_000
TIMELINE = 100_000
REPLICA_HEADER = "X-Orchestrator-Replica"

_Entry = tuple[float, str, str, str, int, str | None]


class RequestLog:
    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._by_id: dict[str, deque[_Entry]] = {}
        self._counts: dict[tuple[str, int], int] = {}
        # Every request but the control API's, in arrival order, whatever it
        # names (list pages name no id): what a rate limit is checked against.
        self._timeline: deque[_Entry] = deque(maxlen=TIMELINE)

    def count(self, route: str, status: int) -> None:
        key = (route, status)
        self._counts[key] = self._counts.get(key, 0) + 1

    def record(
        self,
        rid: str | None,
        t: float,
        method: str,
        path: str,
        route: str,
        status: int,
        replica: str | None = None,
    ) -> None:
        entry = (t, method, path, route, status, replica)
        if route != "control":
            self._timeline.append(entry)
        if rid is None:
            return
        entries = self._by_id.get(rid)
        if entries is None:
            if len(self._by_id) >= MAX_IDS:
                del self._by_id[next(iter(self._by_id))]  # the oldest id goes first
            entries = self._by_id[rid] = deque(maxlen=PER_ID)
        entries.append(entry)

    def requests(self, rid: str | None) -> list[dict[str, Any]]:
        """The requests naming ``rid``; every request (the timeline) for None."""
        rows = self._timeline if rid is None else self._by_id.get(rid, ())
        return [
            {"t": t, "method": m, "path": p, "route": r, "status": s, "replica": who}
            for t, m, p, r, s, who in rows
        ]

    def stats(self) -> dict[str, Any]:
        routes: dict[str, dict[str, int]] = {}
        for (route, status), n in sorted(self._counts.items()):
            routes.setdefault(route, {})[str(status)] = n
        return {"routes": routes, "total": sum(self._counts.values())}

    def clear(self) -> None:
        self._by_id.clear()
        self._counts.clear()
        self._timeline.clear()
