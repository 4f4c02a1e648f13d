"""The lease methods of a store with one owner (memory, SQLite): that one process
holds every tracking, so there is nothing to claim, renew, release or count."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.store.base import Claimed


class SingleOwnerLeases:
    async def claim_trackings(self, limit: int) -> Claimed:
        return Claimed()

    async def renew_leases(self) -> list[str]:
        return []

    async def release_leases(
        self, tracking_ids: Sequence[str] | None = None, *, hold_s: float = 0.0
    ) -> None:
        return None

    def forget_leases(self) -> None:
        return None

    async def heartbeat(self, leases: int) -> list[str]:
        return []
