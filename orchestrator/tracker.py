"""The operations a caller has on trackings: track, query, cancel, abandon, stop retries.

One place owns them, as procrastinate's job manager does: the HTTP handlers
parse and validate a request, call one method here and shape the answer. Intake
is validated before it arrives (``NewTracking``); a refusal that concerns the
tracking itself is a ``TrackingError`` (see ``errors.py``), which the API turns
into its problem.
"""

from __future__ import annotations

import asyncio
import builtins
import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from orchestrator.engine.cancel import CancelAnswer
from orchestrator.engine.ends import group_key, wait_for_end
from orchestrator.errors import (
    AlreadyTerminal,
    EndedMeanwhile,
    GroupNotFound,
    NotAFunctionJob,
    StillLoading,
    StoreUnavailable,
    TrackingNotFound,
    UnknownWorkspace,
)
from orchestrator.platform.discovery import execution_model
from orchestrator.platform.stop_retries import StopAnswer
from orchestrator.store.groups import Group, GroupState, SealGroup
from orchestrator.vocabulary import Kind, TrackingState

if TYPE_CHECKING:
    from orchestrator.engine.cancel import HeldElsewhere
    from orchestrator.engine.engine import Engine
    from orchestrator.interpret.filters import FilterNames
    from orchestrator.metrics import Metrics
    from orchestrator.store.base import NewTracking, Store, Tracking, TrackingQuery

# Intake answers within this, whatever the store does: 201 once durable, else 503
# with Retry-After (a caller's client gives up not much later; a hung database link
# must not hold its requests open).
INTAKE_STORE_BOUND_S = 5.0


class Tracker:
    def __init__(
        self,
        engine: Engine,
        store: Store,
        metrics: Metrics,
        elsewhere: HeldElsewhere | None = None,
        loading: Callable[[], bool] = lambda: False,
    ) -> None:
        self._engine = engine
        self._store = store
        self._metrics = metrics
        # Several replicas: what to do with a tracking another replica polls.
        self._elsewhere = elsewhere
        # True while the start-up load runs: the engine neither polls nor writes yet.
        self._loading = loading
        self._deadline_soonest: float | None = None  # of the groups not ended yet

    # -- intake -------------------------------------------------------------

    async def track(
        self, items: Sequence[NewTracking], seal: SealGroup | None = None
    ) -> list[tuple[Tracking, bool]]:
        """Store the items in one durable transaction, in order, and poll the new ones.

        Each comes back with True when it is new, or False with the tracking that
        already had its (workspace, kind, remote_id). No items: nothing is written.
        ``seal``: a group sealed in the same transaction. Raises GroupSealed (nothing
        written) for a new member of a sealed group; StoreUnavailable when the store
        cannot write, or has not written within ``INTAKE_STORE_BOUND_S``: the write
        may still land, whole, and its trackings are then polled as if it had answered
        in time (posted again, they come back as existing).
        """
        if not items and seal is None:
            return []
        write = asyncio.ensure_future(self._store.create_trackings(items, seal))
        try:
            async with asyncio.timeout(INTAKE_STORE_BOUND_S):
                stored = await asyncio.shield(write)
        except TimeoutError:
            write.add_done_callback(lambda done: self._written_late(done, items))
            raise StoreUnavailable(
                f"store did not take the write within {INTAKE_STORE_BOUND_S:g} s"
            ) from None
        self._adopt(stored, items)
        if seal is not None:
            self._group_news(seal.name)
        return stored

    def _group_news(self, name: str) -> None:
        """A group may have ended (its event committed): wake its waiters."""
        self._engine.ends.ended(group_key(name))

    def _written_late(
        self, write: asyncio.Future[list[tuple[Tracking, bool]]], items: Sequence[NewTracking]
    ) -> None:
        if not write.cancelled() and write.exception() is None and not self._engine.stopping:
            self._adopt(write.result(), items)

    def _adopt(self, stored: list[tuple[Tracking, bool]], items: Sequence[NewTracking]) -> None:
        created: Counter[tuple[str, str]] = Counter()
        for (tracking, new), item in zip(stored, items, strict=True):
            if new:
                created[tracking.workspace, tracking.kind] += 1
                self._engine.add(tracking, item.work_class)
        for (workspace, kind), n in created.items():
            self._metrics.trackings_created_total.labels(workspace=workspace, kind=kind).inc(n)

    def filter_names(self, workspace: str) -> FilterNames | None:
        """The Function operations filter names ``workspace``'s OpenAPI declares."""
        client = self._engine.clients.get(workspace)
        return None if client is None else client.filters

    # -- queries ------------------------------------------------------------

    async def get(self, tracking_id: str) -> Tracking:
        """The tracking, with the poll counters the engine holds; TrackingNotFound."""
        return self._engine.live(await self._stored(tracking_id))

    async def wait(self, tracking_id: str, wait_s: float, gone: Callable[[], bool]) -> Tracking:
        """The tracking once it has ended, or after ``wait_s`` as it is then (woken by
        its terminal write); TrackingNotFound."""
        return await wait_for_end(
            self._engine.ends,
            tracking_id,
            lambda: self.get(tracking_id),
            lambda t: t.state == TrackingState.TERMINAL,
            wait_s,
            gone,
        )

    async def list(self, query: TrackingQuery) -> tuple[list[Tracking], str | None]:
        """A page, newest first, and the next page's cursor; InvalidCursor for a bad one."""
        items, cursor = await self._store.list_trackings(query)
        return [self._engine.live(t) for t in items], cursor

    async def active_function_job(self, tracking_id: str) -> Tracking:
        """The tracking, when it is an active function job (the only kind with a job
        to cancel or a retry chain to stop): else TrackingNotFound, NotAFunctionJob
        or AlreadyTerminal."""
        tracking = await self._stored(tracking_id)
        if tracking.kind != Kind.FUNCTION_JOB:
            raise NotAFunctionJob
        if tracking.state != TrackingState.ACTIVE:
            raise AlreadyTerminal(tracking.outcome)
        return tracking

    # -- caller actions -----------------------------------------------------

    async def cancel(self, tracking_id: str) -> CancelAnswer:
        """Forward a cancel to Moltaro if a fresh read says CanCancel; polling goes on.

        Raises what ``active_function_job`` raises, or EndedMeanwhile.
        """
        tracking = await self.active_function_job(tracking_id)
        self._not_loading()
        answer = await self._engine.cancel(tracking_id)
        if answer is None and self._elsewhere is not None:
            answer = await self._elsewhere.cancel(tracking)
        if answer is None:
            raise EndedMeanwhile
        return answer

    async def stop_retries(self, tracking_id: str, expected_modified_at: str | None) -> StopAnswer:
        """Ask Function operations to stop the job's retry chain; polling goes on.

        ``expected_modified_at``: the job's ModifiedAt the caller saw (None: read it
        now). Raises what ``active_function_job`` raises, or EndedMeanwhile.
        """
        tracking = await self.active_function_job(tracking_id)
        self._not_loading()
        # The stored body may already show an accepted stop or CanStopRetries: false.
        answer = await self._engine.stop_retries(tracking_id, expected_modified_at, tracking.remote)
        if answer is None:
            raise EndedMeanwhile
        return answer

    async def abandon(self, tracking_id: str) -> Tracking:
        """Stop tracking (outcome ``abandoned``); the remote work is left alone.

        Raises TrackingNotFound, or AlreadyTerminal with the outcome it ended with.
        """
        tracking = await self._stored(tracking_id)
        if tracking.state == TrackingState.ACTIVE:
            self._not_loading()
            ended = await self._engine.abandon(tracking_id)
            if (
                ended is None
                and self._elsewhere is not None
                and tracking_id not in self._engine.entries
            ):
                ended = await self._elsewhere.abandon(tracking)
            if ended is not None:
                return ended
            tracking = await self._stored(tracking_id)  # it ended meanwhile: as what?
        raise AlreadyTerminal(tracking.outcome)

    # -- groups -------------------------------------------------------------

    async def seal_group(
        self, name: str, at: float, trace: tuple[str | None, str | None], deadline_at: float | None
    ) -> Group:
        """Seal (idempotent); a group whose members have all ended ends now, with its
        event. GroupNotFound."""
        seal = SealGroup(name, at, self._engine.events.group, deadline_at, *trace)
        sealed = await self._store.seal_group(seal)
        if sealed is None:
            raise GroupNotFound(name)
        self._group_news(name)
        if sealed.deadline_at is not None and sealed.outcome is None:
            known = math.inf if self._deadline_soonest is None else self._deadline_soonest
            self._deadline_soonest = min(sealed.deadline_at, known)
        return sealed

    def group_seal(self, name: str, at: float, trace: tuple[str | None, str | None]) -> SealGroup:
        """A seal to go with an intake (``track``): a batch's, or a follow-ups call's."""
        return SealGroup(name, at, self._engine.events.group, None, *trace)

    async def group(self, name: str) -> Group:
        found = await self._store.get_group(name)
        if found is None:
            raise GroupNotFound(name)
        return found

    async def wait_group(self, name: str, wait_s: float, gone: Callable[[], bool]) -> Group:
        """The group once it has ended, or after ``wait_s`` as it is then; GroupNotFound."""
        return await wait_for_end(
            self._engine.ends,
            group_key(name),
            lambda: self.group(name),
            lambda g: g.outcome is not None,
            wait_s,
            gone,
        )

    async def groups(
        self, state: GroupState | None, limit: int, cursor: str | None
    ) -> tuple[builtins.list[Group], str | None]:
        """A page by name; ValueError for a bad cursor."""
        return await self._store.list_groups(state, limit, cursor)

    async def count_open_groups(self) -> int:
        return await self._store.count_open_groups()

    async def expire_groups(self, ask_store: bool) -> builtins.list[Group]:
        """End the groups whose deadline has passed, each with its event.

        The soonest deadline is known from this replica's seals, and from the store
        when ``ask_store``: the end takes the event log's lock, which terminal writes
        queue behind, so it is taken only when a deadline is due.
        """
        if ask_store:
            self._deadline_soonest = await self._store.next_group_deadline()
        now = self._engine.clock.now()
        if self._deadline_soonest is None or self._deadline_soonest > now:
            return []
        ended = await self._store.expire_groups(now, self._engine.events.group)
        self._deadline_soonest = await self._store.next_group_deadline()
        for group in ended:
            self._group_news(group.name)
        return ended

    # -- the platform's other surfaces --------------------------------------

    async def execution_model(self, workspace: str, function_key: str) -> dict[str, Any] | None:
        """How ``function_key`` runs in ``workspace``, read from its catalog now (None:
        the catalog has no such key). Raises UnknownWorkspace, or DiscoveryError when
        a catalog route cannot be read."""
        client = self._engine.clients.get(workspace)
        if client is None:
            raise UnknownWorkspace
        return await execution_model(client, function_key)

    def _not_loading(self) -> None:
        if self._loading():
            raise StillLoading

    async def _stored(self, tracking_id: str) -> Tracking:
        tracking = await self._store.get_tracking(tracking_id)
        if tracking is None:
            raise TrackingNotFound
        return tracking
