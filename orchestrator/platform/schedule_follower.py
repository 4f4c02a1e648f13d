"""Polling a ``schedule`` tracking: the schedule, then its jobs and runs.

The engine's scheduler drives it like any tracking (rate limit, Retry-After,
deadline); ``Engine._poll`` hands a schedule entry to ``poll`` here. One poll
reads the schedule and the jobs and runs filtered by its ScheduleId, reports
each newly finished occurrence as one ``occurrence`` event, and ends the
tracking when the schedule is disabled (``cancelled``, reason
``schedule_disabled``), gone (``not_found`` after the usual confirmations) or
the deadline passes (``deadline_exceeded``).

Exactly once, across restarts: each occurrence event is written in the same
transaction as the tracking's ``remote`` holding the state that records it as
reported (``PollUpdate.event``), so after a crash either both are stored or
neither, and a restart resumes from the stored state.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from orchestrator.clock import iso
from orchestrator.engine.backoff import jittered, next_delay
from orchestrator.platform.occurrences import FollowState, Scan, mark, public, scan, settle
from orchestrator.platform.operations import read_rows
from orchestrator.platform.wire import as_timestamp, get_ci, text
from orchestrator.store.base import PollUpdate, Tracking
from orchestrator.workspace.readresult import ReadResult

if TYPE_CHECKING:
    from orchestrator.engine.engine import Engine
    from orchestrator.engine.entry import Entry

KIND = "schedule"
_SCHEDULE_FIELDS = (
    "ScheduleId",
    "BusinessFunctionId",
    "FunctionKey",
    "Cron",
    "TimeZone",
    "Status",
    "NextRunAt",
    "LastStatus",
    "TargetHealth",
    "ActiveJobId",
)


@dataclass(slots=True)
class _Followed:
    state: FollowState
    schedule: Any = None  # the last schedule body read
    pending: list[dict[str, Any]] = field(default_factory=list)

    def remote(self) -> dict[str, Any]:
        """What the tracking stores as ``remote``: the schedule and what was reported."""
        return {
            "Schedule": self.schedule,
            "ActiveOccurrences": [public(o) for o in self.pending],
            "Follow": self.state.to_json(),
        }


class ScheduleFollower:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._followed: dict[str, _Followed] = {}

    def adopt(self, t: Tracking) -> None:
        """Take over a schedule tracking (new, or resumed from its stored ``remote``)."""
        engine_entries = self.engine.entries
        for tid in [tid for tid in self._followed if tid not in engine_entries]:
            del self._followed[tid]  # ended (abandoned) since adopted
        remote = t.remote if isinstance(t.remote, Mapping) else {}
        follow = remote.get("Follow")
        self._followed[t.tracking_id] = _Followed(
            FollowState.from_json(follow, t.created_at), remote.get("Schedule")
        )

    async def poll(self, entry: Entry, gen: int) -> None:
        eng = self.engine
        ws = entry.workspace
        client = eng.clients[ws]
        paths = client.cfg.paths
        followed = self._followed.get(entry.tracking_id)
        if followed is None:
            followed = self._followed[entry.tracking_id] = _Followed(FollowState(entry.created_at))
        sched = await client.call("GET", paths.schedule.replace("{id}", entry.remote_id))
        self._observe(ws, sched)
        result: Scan | None = None
        trouble = sched if sched.result not in ("ok", "not_found") else None
        if sched.result == "ok" and not isinstance(sched.body, Mapping):
            trouble = ReadResult(
                "invalid_response",
                sched.http_status,
                error={"kind": "invalid_response", "message": "schedule body is not an object"},
            )
        if trouble is None:
            result, trouble = await self._read_occurrences(entry, followed)
        if gen != entry.gen:
            return  # abandoned while reading
        await self._handle(entry, followed, sched, result, trouble)

    def _observe(self, ws: str, read: ReadResult) -> None:
        eng = self.engine
        eng.probes.polled(ws, KIND, read.result, read.duration)
        eng.probes.set_up(ws, read.answered)

    async def _read_occurrences(
        self, entry: Entry, followed: _Followed
    ) -> tuple[Scan | None, ReadResult | None]:
        client = self.engine.clients[entry.workspace]
        paths = client.cfg.paths
        query = {
            "Source": "Schedule",
            "ScheduleId": entry.remote_id,
            "From": iso(followed.state.since) or "",
        }
        jobs, jread = await read_rows(client, paths.function_jobs, query, "JobId", "CreatedAt")
        self._observe(entry.workspace, jread)
        if jobs is None:
            return None, jread
        runs, rread = await read_rows(client, paths.function_runs, query, "RunId", "StartedAt")
        self._observe(entry.workspace, rread)
        if runs is None:
            return None, rread
        enums = client.enums["function_job"].values
        return (
            scan(followed.state, jobs, runs, enums.get("status", {}), enums.get("run.status", {})),
            None,
        )

    async def _handle(
        self,
        entry: Entry,
        followed: _Followed,
        sched: ReadResult,
        result: Scan | None,
        trouble: ReadResult | None,
    ) -> None:
        eng = self.engine
        now_w, now_m = eng.clock.now(), eng.clock.monotonic()
        entry.polls += 1
        entry.last_polled_at = now_w
        if sched.result == "ok" and trouble is None:
            followed.schedule = sched.body
            entry.remote_status = text(sched.body, "Status")
        if trouble is not None:
            entry.last_error = trouble.error
        else:
            entry.last_error = None
        if result is not None:
            followed.pending = result.pending
            for occurrence in result.finished:
                mark(followed.state, occurrence)
                snapshot = followed.remote()
                tracking = entry.to_tracking(remote=snapshot, last_polled_at=now_w)
                event = eng.events.occurrence(tracking, public(occurrence), now_w)
                eng.writer.add(
                    PollUpdate(
                        tracking_id=entry.tracking_id,
                        polls=entry.polls,
                        last_polled_at=now_w,
                        next_poll_at=now_w,
                        remote_status=entry.remote_status,
                        remote=snapshot,
                        remote_changed=True,
                        last_error=None,
                        event=event,
                    )
                )
            settle(followed.state, result)

        if sched.result == "not_found" and trouble is None:
            if entry.nf_count == 0:
                entry.nf_first = now_w
            entry.nf_count += 1
            p = eng.polling
            if entry.nf_count >= p.not_found_confirmations and now_w - entry.nf_first >= (
                p.not_found_min_s
            ):
                outcome = {
                    "remote_id": entry.remote_id,
                    "reason": "schedule_deleted",
                    "confirmations": entry.nf_count,
                    "first_not_found_at": iso(entry.nf_first),
                    "last_not_found_at": iso(now_w),
                    **self._summary(followed),
                }
                await self._end(entry, followed, "not_found", outcome, now_w)
                return
        elif sched.result == "ok":
            entry.nf_count = 0
            if trouble is None and (entry.remote_status or "").lower() == "disabled":
                outcome = {"remote_id": entry.remote_id, "reason": "schedule_disabled"}
                outcome.update(self._summary(followed))
                await self._end(entry, followed, "cancelled", outcome, now_w)
                return

        if now_m >= entry.deadline_mono:
            outcome = {
                "remote_id": entry.remote_id,
                "last_remote_status": entry.remote_status,
                "last_error": entry.last_error,
                "deadline_at": iso(entry.deadline),
                **self._summary(followed),
            }
            await self._end(entry, followed, "deadline_exceeded", outcome, now_w)
            return
        self._reschedule(entry, followed, sched, result, trouble, now_w, now_m)

    def _reschedule(
        self,
        entry: Entry,
        followed: _Followed,
        sched: ReadResult,
        result: Scan | None,
        trouble: ReadResult | None,
        now_w: float,
        now_m: float,
    ) -> None:
        eng = self.engine
        p = eng.polling
        fingerprint = self._fingerprint(followed) if result is not None else entry.fingerprint
        changed = fingerprint != entry.fingerprint
        entry.fingerprint = fingerprint
        # While an occurrence is in progress, poll with the usual backoff (restarted
        # on change); between occurrences, also just after NextRunAt.
        entry.delay = next_delay(
            None if changed else entry.delay, p.initial_delay_s, p.multiplier, p.max_delay_s
        )
        due = now_m + jittered(entry.delay, p.jitter, eng.rng)
        next_run = as_timestamp(get_ci(followed.schedule, "NextRunAt"))
        if next_run is not None and not followed.pending:
            just_after = now_m + (next_run - now_w) + p.initial_delay_s
            due = min(due, max(just_after, now_m + p.initial_delay_s))
        if sched.result == "not_found":
            remaining = entry.nf_first + p.not_found_min_s - now_w
            due = min(due, now_m + max(remaining, p.initial_delay_s))
        retry_after = max(
            (r.retry_after for r in (sched, trouble) if r is not None and r.retry_after),
            default=None,
        )
        if retry_after is not None:
            due = max(due, now_m + retry_after)
        due = min(due, entry.deadline_mono)
        eng.schedulers[entry.workspace].schedule(entry, due)
        eng.writer.add(
            PollUpdate(
                tracking_id=entry.tracking_id,
                polls=entry.polls,
                last_polled_at=now_w,
                next_poll_at=eng.clock.now() + (due - eng.clock.monotonic()),
                remote_status=entry.remote_status,
                remote=followed.remote() if changed else None,
                remote_changed=changed,
                last_error=entry.last_error,
            )
        )

    @staticmethod
    def _fingerprint(followed: _Followed) -> str:
        sched = followed.schedule
        parts = [get_ci(sched, name) for name in _SCHEDULE_FIELDS]
        parts.append([(o["key"], o["job_status"], o["run_status"]) for o in followed.pending])
        parts.append(followed.state.count)
        return hashlib.blake2b(orjson.dumps(parts, default=str), digest_size=8).hexdigest()

    @staticmethod
    def _summary(followed: _Followed) -> dict[str, Any]:
        sched = followed.schedule
        return {
            "schedule": {name: get_ci(sched, name) for name in _SCHEDULE_FIELDS}
            if isinstance(sched, Mapping)
            else None,
            "occurrences_reported": followed.state.count,
            "last_occurrence": followed.state.last,
            "active_occurrences": [public(o) for o in followed.pending],
        }

    async def _end(
        self,
        entry: Entry,
        followed: _Followed,
        outcome: str,
        result: dict[str, Any],
        polled_at: float,
    ) -> None:
        await self.engine.finisher.finish(
            entry, outcome, result, remote=followed.remote(), polled_at=polled_at
        )
        if entry.tracking_id not in self.engine.entries:
            # Kept when the terminal write failed and the engine reinstated the
            # entry: the state must survive for the next poll.
            self._followed.pop(entry.tracking_id, None)
