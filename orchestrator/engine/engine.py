"""The polling engine: every active tracking, its schedule, and its end.

Per poll: read the status, let the interpreter judge the body, and either
finish the tracking (terminal outcome, not found, deadline) or schedule the
next read with backoff that restarts when the remote status changes. Transport
trouble is never terminal. Nothing is ever submitted to Moltaro, except a
cancel that a caller asked for while ``CanCancel`` was true.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter

from orchestrator.aio import wait_event
from orchestrator.clock import Clock, iso
from orchestrator.config import Settings
from orchestrator.engine.backoff import jittered, next_delay
from orchestrator.engine.entry import Entry
from orchestrator.engine.finishing import Finisher, deadline_result
from orchestrator.engine.probes import PollMetrics
from orchestrator.engine.scheduler import WorkspaceScheduler
from orchestrator.engine.writer import PollWriter
from orchestrator.events.bus import EventBus
from orchestrator.events.cloudevents import EventFactory
from orchestrator.interpret import Phase, Verdict, interpret
from orchestrator.metrics import Metrics
from orchestrator.platform.run_history import RunHistory
from orchestrator.platform.schedule_follower import ScheduleFollower
from orchestrator.store.base import PollUpdate, Store, Tracking
from orchestrator.workspace.client import WorkspaceClient
from orchestrator.workspace.readresult import ReadResult

log = logging.getLogger("orchestrator.engine")


class _ResumePlan:
    __slots__ = ("count", "placed", "seeded", "window")

    def __init__(self, count: int, window: float, seeded: float) -> None:
        self.count = count
        self.window = window
        self.seeded = seeded
        self.placed = 0


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
        self.settings = settings
        self.polling = settings.polling
        self.store = store
        self.clock = clock
        self.metrics = metrics
        self.events = events
        self.clients = clients
        self.rng = rng or random.Random()
        self.entries: dict[str, Entry] = {}
        self.writer = PollWriter(
            store, bus, settings.store.commit_interval_s, settings.store.max_batch
        )
        self.probes = PollMetrics(metrics)
        self.finisher = Finisher(self)
        self.schedulers = {
            name: WorkspaceScheduler(
                name, client.gate, clock.monotonic, self._poll, self.finisher.expire
            )
            for name, client in clients.items()
        }
        for name, client in clients.items():
            # Read at scrape time: no gauge update on the per-request path.
            self.metrics.in_flight.labels(workspace=name).set_function(client.gate.in_flight)
        # The platform's other surfaces: schedule trackings and function-job run history.
        self.schedule_follower = ScheduleFollower(self)
        self.run_history = RunHistory(self)
        self._stop = asyncio.Event()
        self._writer_stop = asyncio.Event()
        self._workers: list[asyncio.Task[None]] = []
        # How many resumed trackings still await their first read.
        self.resume_left = 0
        # Per workspace, read by orchestrator_resume_pending at scrape time: a
        # gauge child's dec() (a label lookup and a lock) was a tenth of the
        # loop's time per first read during a restart.
        self._resume_left_by_ws: dict[str, int] = {}

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # -- time ---------------------------------------------------------------

    def _mono_offset(self) -> float:
        """What turns a wall-clock time into a monotonic one, added to it."""
        return self.clock.monotonic() - self.clock.now()

    def _to_mono(self, wall: float) -> float:
        return wall + self._mono_offset()

    def _to_wall(self, mono: float) -> float:
        return mono - self._mono_offset()

    # -- adding -------------------------------------------------------------

    def add(self, t: Tracking) -> None:
        """Start polling a new active tracking from intake."""
        made = self._register(t, self._mono_offset())
        if made is not None:
            self.probes.active(t.workspace, t.kind).inc()
            entry, due_floor = made
            first_delay = jittered(self.polling.initial_delay_s, self.polling.jitter, self.rng)
            self._schedule_first(entry, max(self.clock.monotonic() + first_delay, due_floor))

    def _register(self, t: Tracking, to_mono: float) -> tuple[Entry, float] | None:
        """The tracking's entry (not yet scheduled) and the earliest time to read it.

        ``to_mono`` turns wall-clock times into monotonic ones (monotonic minus
        wall, taken once per page by the resume). The caller counts the entry
        in ``trackings_active``: the resume does so once per page.
        """
        if t.tracking_id in self.entries or t.state != "active":
            return None
        entry = Entry(t, t.deadline_at + to_mono)
        due_floor = 0.0
        if t.kind == "schedule":
            self.schedule_follower.adopt(t)
        elif t.remote_digest is not None and t.remote_fingerprint is not None:
            # An ordinary in-progress body (no NextRunAt): its digest and fingerprint
            # stand for it. Keyed by the enums it was judged with, the digest simply
            # fails to match if they have changed since.
            entry.fingerprint = t.remote_fingerprint
            entry.digest = t.remote_digest
        elif t.remote is not None:
            verdict = interpret(t.kind, t.remote, self.clients[t.workspace].enums[t.kind])
            entry.fingerprint = verdict.fingerprint
            if verdict.next_run_at is not None:
                due_floor = verdict.next_run_at + to_mono
        self.entries[t.tracking_id] = entry
        return entry, due_floor

    def _schedule_first(self, entry: Entry, due: float) -> None:
        self.schedulers[entry.workspace].schedule(entry, min(due, entry.deadline_mono))

    async def resume(self, store: Store, page_size: int = 500) -> int:
        """Resume every active tracking after a restart; returns how many.

        Rows are read a page at a time and kept only as compact entries, so the
        peak memory of a restart stays close to that of steady state. First
        reads are spread over the longer of the initial delay and the time the
        workspace's rate limit needs for all of them: no burst above the limit.
        The spread is planned from the counts, so each page is scheduled as it
        is read and pollers already running read the first pages while the
        later ones load.
        """
        counts = await store.active_counts()
        now = self.clock.monotonic()
        plans: dict[str, _ResumePlan] = {}
        p = self.polling
        for ws, n in counts.items():
            if ws in self.clients and n > 0:
                window = max(p.initial_delay_s, n / self.clients[ws].cfg.max_requests_per_second)
                # Unless its first read finds a change, a resumed tracking is read
                # again no sooner than one window later, even with the jitter's
                # shortest draw: its re-read is then due after every first read,
                # and a service slower than the limit reads all the others before
                # any of them again (seeding at half the window let jitter bring
                # re-reads forward among the first reads). max_delay_s still wins.
                soonest = p.multiplier * (1.0 - p.jitter)
                seeded = min(p.max_delay_s, max(p.initial_delay_s, window / soonest))
                plans[ws] = _ResumePlan(n, window, seeded)
                self._pending(ws, n)
        count = 0
        after: str | None = None
        while page := await store.load_active(after, page_size):
            after = page[-1].tracking_id
            count += len(page)
            to_mono = self._mono_offset()
            added: Counter[tuple[str, str]] = Counter()
            for t in page:
                plan = plans.get(t.workspace)
                if plan is None:
                    log.error(
                        "tracking of an unconfigured workspace left as is",
                        extra={"fields": {"tracking_id": t.tracking_id, "workspace": t.workspace}},
                    )
                    continue
                made = self._register(t, to_mono)
                if made is None:
                    continue
                added[t.workspace, t.kind] += 1
                entry, due_floor = made
                entry.resumed = True
                entry.delay = plan.seeded
                if plan.placed >= plan.count:  # more than counted: spread past the window
                    self._pending(t.workspace, 1)
                offset = plan.window * (plan.placed + self.rng.random()) / plan.count
                plan.placed += 1
                self._schedule_first(entry, max(now + offset, due_floor))
            for (ws, kind), n in added.items():
                self.probes.active(ws, kind).inc(n)
        for ws, plan in plans.items():
            if plan.placed < plan.count:  # counted, then gone before its page
                self._pending(ws, plan.placed - plan.count)
        return count

    def _pending(self, workspace: str, n: int) -> None:
        left = self._resume_left_by_ws
        if workspace not in left:
            left[workspace] = 0
            self.metrics.resume_pending.labels(workspace=workspace).set_function(
                lambda: left[workspace]
            )
        left[workspace] += n
        self.resume_left += n

    def first_read_done(self, entry: Entry) -> None:
        """A resumed tracking has had its first read (or ended before it)."""
        entry.resumed = False
        self._resume_left_by_ws[entry.workspace] -= 1
        self.resume_left -= 1

    # -- polling ------------------------------------------------------------

    async def _poll(self, entry: Entry, gen: int) -> None:
        ws, kind = entry.workspace, entry.kind
        probes = self.probes
        probes.lateness(ws).observe(max(0.0, self.clock.monotonic() - entry.due))
        if entry.resumed:
            self.first_read_done(entry)
        if kind == "schedule":
            await self.schedule_follower.poll(entry, gen)
            return
        result = await self.clients[ws].read(kind, entry.remote_id, entry.digest)
        if gen != entry.gen:
            return  # abandoned while the read was in flight
        if result.unchanged and entry.last_error is None and self._unchanged(entry, result):
            return
        await self._handle(entry, result)

    def _unchanged(self, entry: Entry, r: ReadResult) -> bool:
        """The common read: the same ordinary in-progress body as last time, no error
        to clear. Counted and rescheduled, nothing written; False leaves the deadline
        to ``_handle``. Equivalent to ``_handle``'s path for such a read, minus its
        branches: most reads of a busy service come this way."""
        now_m = self.clock.monotonic()
        if now_m >= entry.deadline_mono:
            return False
        ws = entry.workspace
        entry.polls += 1
        entry.last_polled_at = self.clock.now()
        entry.nf_count = 0
        probes = self.probes
        probes.polled(ws, entry.kind, "ok", r.duration)
        probes.set_up(ws, True)
        p = self.polling
        delay = entry.delay = next_delay(
            entry.delay, p.initial_delay_s, p.multiplier, p.max_delay_s
        )
        due = now_m + jittered(delay, p.jitter, self.rng)
        self.schedulers[ws].schedule(entry, min(due, entry.deadline_mono))
        return True

    async def _handle(self, entry: Entry, r: ReadResult) -> None:
        ws, kind = entry.workspace, entry.kind
        now_w, now_m = self.clock.now(), self.clock.monotonic()
        scheduler = self.schedulers[ws]
        entry.polls += 1
        entry.last_polled_at = now_w
        previous_error = entry.last_error
        label = r.result
        error = r.error
        verdict: Verdict | None = None
        if r.unchanged:
            pass  # the same ordinary in-progress body as last time: nothing to judge
        elif r.result == "ok":
            verdict = interpret(kind, r.body, self.clients[ws].enums[kind])
            if verdict.phase is Phase.INVALID:
                label = "invalid_response"
                error = {
                    "kind": "invalid_response",
                    "message": f"not a status body ({verdict.anomaly})",
                }
                verdict = None
        self.probes.polled(ws, kind, label, r.duration)
        self.probes.set_up(ws, r.answered)

        changed = False
        event = None
        next_run_at: float | None = None
        if r.unchanged:
            entry.nf_count = 0
            entry.last_error = None
        elif verdict is not None:
            entry.nf_count = 0
            entry.last_error = None
            changed = verdict.fingerprint != entry.fingerprint
            ordinary = verdict.phase is Phase.PENDING and verdict.next_run_at is None
            entry.digest = r.digest if ordinary else None
            if verdict.phase is Phase.ANOMALY:
                self.probes.anomaly(ws, kind, verdict.anomaly or "unknown")
                if changed:  # once per anomalous body, not once per read of it
                    log.warning(
                        "contract anomaly: kept polling, not reported as success",
                        extra={
                            "fields": {
                                "tracking_id": entry.tracking_id,
                                "workspace": ws,
                                "kind": kind,
                                "remote_id": entry.remote_id,
                                "reason": verdict.anomaly,
                                "remote_status": verdict.remote_status,
                                "missing_evidence": verdict.details.get("missing_evidence"),
                            }
                        },
                    )
            status_moved = verdict.remote_status != entry.remote_status
            entry.fingerprint = verdict.fingerprint
            entry.remote_status = verdict.remote_status
            if verdict.terminal:
                result = verdict.result
                if kind == "function_job" and self.polling.run_history:
                    gen = entry.gen
                    result = await self.run_history.attach(entry, r.body, result)
                    if gen != entry.gen:
                        return  # abandoned while the runs were read
                await self.finisher.finish(
                    entry, verdict.phase.value, result, remote=r.body, polled_at=now_w
                )
                return
            next_run_at = verdict.next_run_at
            if status_moved and entry.notify == "all":
                event = self.events.status_changed(
                    entry.to_tracking(remote=r.body, last_polled_at=now_w), now_w
                )
        elif label == "not_found":
            if entry.nf_count == 0:
                entry.nf_first = now_w
            entry.nf_count += 1
            if (
                entry.nf_count >= self.polling.not_found_confirmations
                and now_w - entry.nf_first >= self.polling.not_found_min_s
            ):
                result = {
                    "remote_id": entry.remote_id,
                    "confirmations": entry.nf_count,
                    "first_not_found_at": iso(entry.nf_first),
                    "last_not_found_at": iso(now_w),
                }
                await self.finisher.finish(entry, "not_found", result, polled_at=now_w)
                return
        else:
            entry.last_error = error

        if now_m >= entry.deadline_mono:
            await self.finisher.finish(entry, "deadline_exceeded", deadline_result(entry))
            return

        p = self.polling
        entry.delay = next_delay(
            None if changed else entry.delay, p.initial_delay_s, p.multiplier, p.max_delay_s
        )
        due = now_m + jittered(entry.delay, p.jitter, self.rng)
        if label == "not_found":
            # Do not let backoff stretch the confirmation window far past its minimum.
            remaining = entry.nf_first + p.not_found_min_s - now_w
            due = min(due, now_m + max(remaining, p.initial_delay_s))
        if next_run_at is not None:
            due = max(due, self._to_mono(next_run_at))
        if r.retry_after is not None:
            due = max(due, now_m + r.retry_after)
        due = min(due, entry.deadline_mono)
        scheduler.schedule(entry, due)
        # A read that changed nothing is not written: the counters live in the
        # entry (the API shows them from there) and are checkpointed at shutdown
        # and with the terminal state. Writing every read cost the store's
        # thread about 40 % of the CPU of the reads themselves.
        if changed or event is not None or entry.last_error != previous_error:
            self.writer.add(
                PollUpdate(
                    tracking_id=entry.tracking_id,
                    polls=entry.polls,
                    last_polled_at=now_w,
                    next_poll_at=self._to_wall(due),
                    remote_status=entry.remote_status,
                    remote=r.body if changed else None,
                    remote_changed=changed,
                    fingerprint=entry.fingerprint if changed else None,
                    digest=entry.digest if changed else None,
                    last_error=entry.last_error,
                    event=event,
                )
            )

    def live(self, t: Tracking) -> Tracking:
        """``t`` as stored, with the poll counters the engine holds in memory."""
        entry = self.entries.get(t.tracking_id)
        if entry is not None and t.state == "active":
            t.polls = max(t.polls, entry.polls)
            t.last_polled_at = entry.last_polled_at or t.last_polled_at
            t.next_poll_at = self._to_wall(entry.due)
        return t

    async def _checkpoint(self) -> None:
        """Hand every active tracking's counters to the writer (at shutdown)."""
        for i, entry in enumerate(list(self.entries.values()), 1):
            if i % 5000 == 0:
                # 100,000 updates in one go held the loop for 0.25-0.4 s (logged
                # as a stall); /healthz and the metrics still answer while draining.
                await asyncio.sleep(0)
            if entry.last_polled_at is not None:
                self.writer.add(
                    PollUpdate(
                        tracking_id=entry.tracking_id,
                        polls=entry.polls,
                        last_polled_at=entry.last_polled_at,
                        next_poll_at=self._to_wall(entry.due),
                        last_error=entry.last_error,
                    )
                )

    # -- caller actions -----------------------------------------------------

    async def abandon(self, tracking_id: str) -> Tracking | None:
        """Stop tracking (outcome ``abandoned``); the remote work is untouched."""
        entry = self.entries.get(tracking_id)
        if entry is None:
            return None
        return await self.finisher.finish(
            entry,
            "abandoned",
            {"remote_id": entry.remote_id, "last_remote_status": entry.remote_status},
        )

    def nudge(self, tracking_id: str) -> None:
        """Read soon (after a cancel), still within the rate limit."""
        entry = self.entries.get(tracking_id)
        if entry is not None:
            entry.delay = None
            soon = self.clock.monotonic() + min(0.2, self.polling.initial_delay_s)
            self.schedulers[entry.workspace].schedule(entry, min(soon, entry.deadline_mono))

    # -- running ------------------------------------------------------------

    async def refresh_enums(self) -> None:
        for name, client in self.clients.items():
            # Digests are keyed by the enums: bodies read under new ones are judged afresh.
            ok = await client.load_enums()
            for kind, enum_map in client.enums.items():
                fallback = 1 if enum_map.source == "fallback" else 0
                self.metrics.enum_source.labels(workspace=name, kind=kind).set(fallback)
            if ok:
                log.info("enums read from OpenAPI", extra={"fields": {"workspace": name}})

    async def _enum_refresher(self) -> None:
        while not self._stop.is_set():
            fallback = any(
                m.source == "fallback" for c in self.clients.values() for m in c.enums.values()
            )
            wait = self.polling.openapi_refresh_s
            if fallback:
                wait = min(30.0, wait)
            if not await wait_event(self._stop, wait):
                await self.refresh_enums()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for name, scheduler in self.schedulers.items():
                for i in range(scheduler.max_in_flight):
                    self._workers.append(
                        tg.create_task(scheduler.worker(), name=f"poller:{name}:{i}")
                    )
            tg.create_task(self.writer.run(self._writer_stop), name="poll-writer")
            tg.create_task(self._enum_refresher(), name="enum-refresher")

    async def stop(self, grace_s: float) -> None:
        """Stop dispatching, let in-flight reads finish within the grace, flush."""
        self._stop.set()
        for scheduler in self.schedulers.values():
            scheduler.stop()
        pending = [t for t in self._workers if not t.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=grace_s)
            if still:
                log.warning(
                    "cancelling status reads still in flight after the grace period",
                    extra={"fields": {"count": len(still)}},
                )
                for task in still:
                    task.cancel()
                await asyncio.wait(still, timeout=1.0)
        if self.finisher.tasks:
            await asyncio.wait(list(self.finisher.tasks))
        await self._checkpoint()
        self._writer_stop.set()
