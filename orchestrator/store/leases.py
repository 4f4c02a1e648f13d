"""Who holds a tracking, as each kind of store sees it (see ``base.py`` on leases).

A store with one owner (memory, SQLite) serves one process, which holds every
tracking: there is nothing to claim, renew, release or count
(``SingleOwnerLeases``). A shared store (PostgreSQL) keeps a ``LeaseBook``: the
fencing token of each lease this replica holds, which its poll results and
terminal writes carry.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.store.base import Claimed, Renewal


class SingleOwnerLeases:
    """The lease methods of a store with one owner."""

    async def claim_trackings(self, limit: int) -> Claimed:
        return Claimed()

    async def renew_leases(self, held: int) -> Renewal:
        return Renewal([], {})

    async def release_leases(
        self, tracking_ids: Sequence[str] | None = None, *, hold_s: float = 0.0
    ) -> None:
        return None

    def forget_leases(self) -> None:
        return None


class LeaseBook:
    """The leases this replica holds: tracking_id to fencing token."""

    def __init__(self) -> None:
        self.tokens: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.tokens)

    def hold(self, tracking_id: str, token: int) -> None:
        self.tokens[tracking_id] = token

    def drop(self, tracking_ids: Sequence[str]) -> None:
        for tracking_id in tracking_ids:
            self.tokens.pop(tracking_id, None)

    def arrays(self, tracking_ids: Sequence[str] | None = None) -> tuple[list[str], list[int]]:
        ids = list(self.tokens) if tracking_ids is None else [
            t for t in tracking_ids if t in self.tokens
        ]  # fmt: skip
        ids.sort()
        return ids, [self.tokens[t] for t in ids]
