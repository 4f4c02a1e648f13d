"""The polling engine: every active tracking, its schedule, and its end.

Per poll: the tracking's kind handler reads and judges (``kinds/``), the pure
``decide()`` says what comes next (``decision.py``), and ``_apply`` does it:
finish the tracking, or schedule its next read. Transport trouble is never
terminal. Nothing is ever submitted to Moltaro, except a cancel or a
retry-chain stop that a caller asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass

import anyio

from orchestrator import tracing
from orchestrator.clock import Clock
from orchestrator.config import Settings
from orchestrator.engine.book import Book
from orchestrator.engine.cancel import CancelAnswer, cancel
from orchestrator.engine.counters import UnsavedCounters
from orchestrator.engine.decision import End, ReadAt, Report, StoreDeadline, Write, decide, jittered
from orchestrator.engine.ends import Ends, GroupMetrics
from orchestrator.engine.entry import Entry
from orchestrator.engine.learner import Learner
from orchestrator.engine.poll_metrics import PollMetrics
from orchestrator.engine.resume_plan import plan_resume
from orchestrator.engine.writer import EngineWriter, Finisher, abandoned_result
from orchestrator.events.bus import EventBus
from orchestrator.events.cloudevents import EventFactory
from orchestrator.kinds import handlers
from orchestrator.kinds.base import Judgement, KindHandler
from orchestrator.metrics import Metrics
from orchestrator.platform.run_history import RunHistory
from orchestrator.platform.stop_retries import RetryStopper, StopAnswer
from orchestrator.store.base import ActiveSource, Store, Tracking
from orchestrator.vocabulary import NextPollReason
from orchestrator.workspace.client import WorkspaceClient
from orchestrator.workspace.enums import keep_enums_fresh

log = logging.getLogger("orchestrator.engine")


@dataclass
class LoadProgress:
    """How far the start-up load of the active trackings is (``/readyz``, metrics)."""

    loaded: int = 0
    total: int = 0
    done: bool = False


class Engine:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        clock: Clock,
        metrics: Metrics,
        bus: EventBus,
        events: EventFactory,
        clients: dict[str, WorkspaceClient],
        rng: random.Random | None = None,
    ) -> None:
        self.polling = settings.polling
        self.store = store
        self.clock = clock
        self.metrics = metrics
        self.events = events
        self.clients = clients
        self.rng = rng or random.Random()
        self.writer = EngineWriter(store, bus, settings.store.max_batch)
        self.poll_metrics = PollMetrics(metrics)
        metrics.write_backlog.set_function(lambda: self.writer.backlog)
        for name, client in clients.items():
            # Read at scrape time: no gauge update on the per-request path.
            self.metrics.in_flight.labels(workspace=name).set_function(client.gate.in_flight)
        history = None
        if settings.polling.run_history:
            history = RunHistory(
                lambda ws, result: self.poll_metrics.admin_request(ws, "function_runs", result)
            )
        self.handlers: dict[str, KindHandler] = handlers(history, settings.polling.filter_skew_s)
        self.book = Book(
            clients,
            self.handlers,
            clock.monotonic,
            self.poll_metrics,
            self._poll,
            lambda entry: self.finisher.expire(entry),
        )
        self.ends = Ends()  # callers waiting for a tracking to end
        metrics.api_waits.set_function(lambda: self.ends.waiting)
        events.group_observer = GroupMetrics(metrics)
        self.finisher = Finisher(
            self.writer,
            events,
            self.poll_metrics,
            clock,
            self.book,
            lambda: self.stopping,
            self.ends,
        )
        # Counters of reads that changed nothing: written a checkpoint later.
        self.unsaved = UnsavedCounters(self.writer, self.book.entries, lambda: -self._mono_offset())
        self.stoppers = {  # one per workspace: each remembers the stops it saw accepted
            ws: RetryStopper(client, functools.partial(self.poll_metrics.admin_request, ws))
            for ws, client in clients.items()
        }
        self._stop = asyncio.Event()
        self._pollers = anyio.CancelScope()
        self._pollers_done = asyncio.Event()
        self.learner = Learner(settings, metrics, clock)  # adaptive polling

    @property
    def entries(self) -> Mapping[str, Entry]:
        """Every tracking this process polls, by id."""
        return self.book.entries

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _mono_offset(self) -> float:
        """What turns a wall-clock time into a monotonic one, added to it."""
        return self.clock.monotonic() - self.clock.now()

    def _to_wall(self, mono: float) -> float:
        return mono - self._mono_offset()

    # -- adding -------------------------------------------------------------

    def add(self, t: Tracking, work_class: str | None = None) -> None:
        """Start polling a new active tracking from intake (``work_class``: its hint)."""
        made = self.book.adopt(t, self._mono_offset(), work_class)
        if made is not None:
            entry, due_floor = made
            planned = None if work_class is None else self.learner.hint(entry)
            first_delay = jittered(self.polling.initial_delay_s, self.polling.jitter, self.rng)
            due = self.clock.monotonic() + first_delay if planned is None else planned
            reason = NextPollReason.FIRST_READ if planned is None else NextPollReason.ADAPTIVE
            self.book.first_read(entry, max(due, due_floor), reason, resumed_delay=None)

    async def resume(
        self, store: ActiveSource, chunk: int = 2000, progress: LoadProgress | None = None
    ) -> int:
        """Resume every active tracking after a restart; returns how many.

        Rows come a chunk at a time and are kept only as compact entries (a restart's
        peak memory stays near steady state). First reads are spread over the longer
        of the initial delay and what the workspace's rate limit needs for all of them,
        planned from the counts, in the order the rows come: the first loaded are due
        first. ``progress`` counts what is loaded, for /readyz and the metrics.
        """
        rates = {ws: c.cfg.max_requests_per_second for ws, c in self.clients.items()}
        counts = await store.active_counts()
        plans = plan_resume(counts, rates, self.polling)
        progress = progress or LoadProgress()
        progress.total = sum(counts.values())
        pending = self.book.pending
        for ws, counted in plans.items():
            pending.add(ws, counted.count)
        now = self.clock.monotonic()
        count = 0
        # Closed however the load ends (a stop while starting cancels it): the reading
        # thread is told at once, not when the generator is collected.
        async with contextlib.aclosing(store.active_chunks(chunk)) as pages:
            async for page in pages:
                count += len(page)
                self.book.resume(page, plans, now, self._mono_offset(), self.rng)
                progress.loaded = count
                await asyncio.sleep(0)  # the API answers between chunks
        for ws, left in plans.items():
            if left.placed < left.count:  # counted, then gone before its page
                pending.add(ws, left.placed - left.count)
        progress.total = max(progress.total, count)
        return count

    # -- polling ------------------------------------------------------------

    async def _poll(self, entry: Entry, ticket: int) -> None:
        self.poll_metrics.lateness(entry.workspace).observe(
            max(0.0, self.clock.monotonic() - entry.due)
        )
        self.book.first_read_done(entry)
        handler, client = self.handlers[entry.kind], self.clients[entry.workspace]
        if tracing.tracer is None or entry.trace is None:
            judgement = await handler.poll(entry, client)
        else:  # its requests' CLIENT spans go in the tracking's trace
            token = tracing.POLL_TRACE.set(entry.trace)
            try:
                judgement = await handler.poll(entry, client)
            finally:
                tracing.POLL_TRACE.reset(token)
        if self.book.holds(entry, ticket):  # else ended or dropped while the read was in flight
            await self._apply(entry, judgement)

    async def _apply(self, entry: Entry, j: Judgement) -> None:
        """The one place a poll's decision takes effect: the metrics of its reads, the
        entry's next state, then each effect in the order the decision gives."""
        ws, kind = entry.workspace, entry.kind
        now_w, now_m = self.clock.now(), self.clock.monotonic()
        pm = self.poll_metrics
        for label, duration in j.reads:
            pm.polled(ws, kind, label, duration)
        pm.set_up(ws, j.answered)
        plan = self.learner.observe(entry, j, now_w, now_m)
        d = decide(entry, j, plan, now_w, now_m, self.polling, self.rng.random())
        if j.anomaly is not None:
            pm.anomaly(ws, kind, j.anomaly)
            if d.changed:  # logged once per anomalous body, not once per read of it
                log.warning(
                    "contract anomaly: kept polling, not reported as success",
                    extra={"fields": {
                        "tracking_id": entry.tracking_id, "workspace": ws, "kind": kind,
                        "remote_id": entry.remote_id, "reason": j.anomaly,
                        "remote_status": j.remote_status,
                        "missing_evidence": (j.anomaly_details or {}).get("missing_evidence"),
                    }},
                )  # fmt: skip
        entry.state = d.state
        written = False
        for effect in d.effects:
            match effect:
                case ReadAt(due, reason):
                    self.book.schedule(entry, due, reason)
                case Write(remote, changed, status_event):
                    written = True
                    event = None
                    if status_event:
                        shown = entry.to_tracking(remote=j.remote, last_polled_at=now_w)
                        event = self.events.status_changed(shown, now_w)
                    next_at = self._to_wall(entry.due)
                    self.writer.add(entry.update(now_w, remote, changed, next_at, event))
                case StoreDeadline():
                    written = True
                    self.writer.add(entry.update(now_w, None, False, now_w, deadline_moved=True))
                case Report(snapshot, occurrence):
                    written = True
                    shown = entry.to_tracking(remote=snapshot, last_polled_at=now_w)
                    reported = self.events.occurrence(shown, occurrence, now_w)
                    self.writer.add(entry.update(now_w, snapshot, True, now_w, reported))
                case End():
                    await self._finish(entry, j, effect, now_w)
                    return  # the terminal write carries the counters
        if written:
            self.unsaved.written(entry)
        else:
            self.unsaved.read(entry)

    async def _finish(self, entry: Entry, j: Judgement, end: End, now_w: float) -> None:
        result = end.result
        if end.conclude:
            ticket = self.book.ticket(entry)
            client = self.clients[entry.workspace]
            result = await self.handlers[entry.kind].conclude(entry, client, j)
            if not self.book.holds(entry, ticket):
                return  # ended or dropped while the side reads were made
        await self.finisher.finish(entry, end.outcome, result, remote=j.remote, polled_at=now_w)

    def live(self, t: Tracking) -> Tracking:
        """``t`` as stored, with the poll counters the engine holds in memory."""
        entry = self.entries.get(t.tracking_id)
        if entry is not None and t.state == "active":
            t.polls = max(t.polls, entry.state.polls)
            t.last_polled_at = entry.state.last_polled_at or t.last_polled_at
            t.next_poll_at = self._to_wall(entry.due)
            t.next_poll_reason = entry.reason
        return t

    # -- caller actions -----------------------------------------------------

    async def abandon(self, tracking_id: str) -> Tracking | None:
        """Stop tracking (outcome ``abandoned``); the remote work is untouched."""
        entry = self.entries.get(tracking_id)
        if entry is None:
            return None
        result = abandoned_result(entry.remote_id, entry.state.remote_status)
        return await self.finisher.finish(entry, "abandoned", result)

    async def cancel(self, tracking_id: str) -> CancelAnswer | None:
        """A caller's cancel: forwarded only while a fresh read says CanCancel.
        None when the tracking is no longer active here."""
        entry = self.entries.get(tracking_id)
        if entry is None:
            return None
        ws, kind = entry.workspace, entry.kind
        counted = functools.partial(self.poll_metrics.polled, ws, kind)
        answer = await cancel(
            self.clients[ws], kind, entry.remote_id, entry.state.remote_status, counted
        )
        if answer.status == 202:
            self.nudge(tracking_id)
        return answer

    async def stop_retries(
        self, tracking_id: str, expected: str | None, known: object = None
    ) -> StopAnswer | None:
        """Stop a function job's retry chain (``known``: its latest stored body);
        None when no longer active here."""
        entry = self.entries.get(tracking_id)
        if entry is None:
            return None
        answer = await self.stoppers[entry.workspace].stop(entry.remote_id, expected, known)
        if answer.status == 202:
            self.nudge(tracking_id)
        return answer

    def nudge(self, tracking_id: str) -> None:
        """Read soon (after a cancel), still within the rate limit."""
        entry = self.entries.get(tracking_id)
        if entry is not None:
            entry.state = entry.state._replace(delay=None)  # the backoff starts over
            soon = self.clock.monotonic() + min(0.2, self.polling.initial_delay_s)
            self.book.schedule(entry, soon, NextPollReason.BACKOFF)

    # -- running ------------------------------------------------------------

    async def run(self) -> None:
        await self.learner.load(self.store)  # what adaptive polling had learned
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._poll_all, name="pollers")
            tg.start_soon(self.writer.run, name="engine-writer")
            tg.start_soon(self.unsaved.run, self._stop, name="counter-checkpoints")
            tg.start_soon(self.learner.run, self.store, self._stop, name="adaptive-flush")
            tg.start_soon(
                keep_enums_fresh,
                self.clients,
                self.metrics,
                self.polling.openapi_refresh_s,
                self._stop,
                name="enum-refresher",
            )

    async def _poll_all(self) -> None:
        """Every workspace's pollers, under one cancel scope that ``stop`` may cancel."""
        with self._pollers:
            async with anyio.create_task_group() as tg:
                for name, scheduler in self.book.schedulers.items():
                    for i in range(scheduler.max_in_flight):
                        tg.start_soon(scheduler.worker, name=f"poller:{name}:{i}")
        self._pollers_done.set()

    async def stop(self, grace_s: float) -> None:
        """Stop dispatching, let in-flight reads finish within the grace, write the rest."""
        self._stop.set()
        for scheduler in self.book.schedulers.values():
            scheduler.stop()
        with anyio.move_on_after(grace_s):
            await self._pollers_done.wait()
        if not self._pollers_done.is_set():
            log.warning(
                "cancelling status reads still in flight after the grace period",
                extra={"fields": {"count": sum(c.gate.in_flight() for c in self.clients.values())}},
            )
            self._pollers.cancel()
            with anyio.move_on_after(1.0):
                await self._pollers_done.wait()
        if self.finisher.tasks:
            await asyncio.wait(list(self.finisher.tasks))
        # Only what was read since the last checkpoint: the rest is in the store already.
        await self.unsaved.flush()
        await self.learner.flush(self.store)
        self.writer.close()
