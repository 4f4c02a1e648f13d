"""Everything one simulated workspace holds, and the operations that create work in it."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orchestrator.simulator import catalog
from orchestrator.simulator.builds import GeneratedBuild
from orchestrator.simulator.cron import Cron
from orchestrator.simulator.enums import CONTRACT, LEASED, QUEUED, SRC_API, SRC_SCHEDULE
from orchestrator.simulator.faults import FaultBook, parse_rules
from orchestrator.simulator.index import JobIndex
from orchestrator.simulator.jobs import GeneratedJob, plan_attempts
from orchestrator.simulator.model import Build, Job, JobMeta
from orchestrator.simulator.present import Settings
from orchestrator.simulator.profiles import Profile
from orchestrator.simulator.reqlog import RequestLog
from orchestrator.simulator.schedules import Schedule, ScheduleBook

ID_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,200}")
_JOB = CONTRACT.value("Job")
_COMMAND = CONTRACT.value("Command")


class Refused(Exception):
    """A request the workspace refuses; the handler answers ``status`` with ``detail``."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def valid_id(text: str) -> bool:
    return ID_PATTERN.fullmatch(text) is not None and text.strip(".") != ""


@dataclass(slots=True)
class Publication:
    business_function_id: str
    timeout_seconds: int | None


class SimState:
    def __init__(
        self, profile: Profile, seed: int | None, clock: Callable[[], float] = time.time
    ) -> None:
        self.clock = clock
        self.profile = profile
        self.seed = seed
        self.settings = Settings()
        self.log = RequestLog(profile.request_log)
        self._reseed()
        self.jobs: dict[str, Job] = {}
        self.index = JobIndex()  # for the admin lists; every job goes through add_job
        self.dedup: dict[tuple[str, str], str] = {}
        self.builds: dict[str, dict[str, Build]] = {"net": {}, "ui": {}}
        self.faults = FaultBook(self.fault_rng)
        # Per BusinessFunctionId, the jobs that may still be queued or leased.
        self._live: dict[str, list[Job]] = {}
        self.schedules = ScheduleBook(
            self._enqueue_occurrence, self.jobs.get, self.new_id, self.busy
        )
        self._install_defaults()

    def _reseed(self) -> None:
        # Work outcomes and fault decisions draw from separate streams, so the
        # number of status reads never changes which job fails.
        self.rng = random.Random(self.seed)
        self.fault_rng = random.Random(None if self.seed is None else f"faults-{self.seed}")

    def _install_defaults(self) -> None:
        now = self.clock()
        self.faults.replace(parse_rules({"rules": list(self.profile.faults)}), now)
        for seed in catalog.SCHEDULES:
            row = catalog.FUNCTIONS_BY_ID[seed.business_function_id]
            self.schedules.add(
                Schedule(
                    schedule_id=seed.schedule_id,
                    business_function_id=row.business_function_id,
                    function_key=row.function_key,
                    cron=Cron.parse(seed.cron),
                    time_zone="UTC",
                    enabled=seed.enabled,
                    valid_target=row.contract == _JOB and row.scope == "Global",
                ),
                now,
            )

    def reset(self) -> None:
        self._reseed()
        self.faults.rng = self.fault_rng
        self.settings = Settings(version=self.settings.version + 1)
        self.log.clear()
        self.jobs.clear()
        self._live.clear()
        self.index.clear()
        self.dedup.clear()
        for builds in self.builds.values():
            builds.clear()
        self.schedules.clear()
        self._install_defaults()

    def new_id(self, prefix: str) -> str:
        while True:
            candidate = f"{prefix}-{self.rng.getrandbits(64):016x}"
            if candidate not in self.jobs and self.find_build(candidate) is None:
                return candidate

    def tick(self, now: float) -> None:
        """Fire due schedule occurrences; one comparison when none is due."""
        if now >= self.schedules.next_due:
            self.schedules.evaluate(now)

    # -- function jobs ---------------------------------------------------------

    def publication(self, function_key: str) -> Publication:
        """What an enqueue of ``function_key`` targets; keys outside the catalog are ad hoc Jobs."""
        row = catalog.PUBLICATIONS_BY_KEY.get(function_key)
        if row is None:
            if function_key in catalog.FUNCTIONS_BY_KEY:
                raise Refused(404, f"Function {function_key!r} has no API publication.")
            return Publication(catalog.ad_hoc_function_id(function_key), None)
        if row.is_retired:
            raise Refused(404, f"The API publication {function_key!r} is retired.")
        if row.kind != 1:
            raise Refused(404, f"{function_key!r} is published as a Command, not for enqueue.")
        function = catalog.FUNCTIONS_BY_ID.get(row.business_function_id)
        if function is not None and function.contract == _COMMAND:
            # The catalog's contract is the runtime truth: a Command runs while its
            # caller waits, whatever the publication says; it is never queued.
            raise Refused(
                409,
                f"{function_key!r} is published with the Command contract: invoke it as a "
                "command; it cannot be enqueued.",
            )
        if not row.is_enabled:
            raise Refused(409, f"The API publication {function_key!r} is disabled.")
        return Publication(row.business_function_id, row.timeout_seconds)

    def enqueue(
        self,
        function_key: str,
        *,
        now: float,
        source: int = SRC_API,
        correlation_id: str | None = None,
        dedup_key: str | None = None,
        schedule_id: str | None = None,
        trigger_binding_id: str | None = None,
        action_id: str | None = None,
        entity_id: str | None = None,
        publication: Publication | None = None,
    ) -> tuple[Job, bool]:
        """The new job, or the active one holding the same DeduplicationKey (then False)."""
        if dedup_key is not None:
            existing = self.jobs.get(self.dedup.get((function_key, dedup_key), ""))
            view = existing.view(now) if existing is not None else None
            if existing is not None and view is not None and view.status in (QUEUED, LEASED):
                return existing, False
        pub = publication or self.publication(function_key)
        behaviour = self.profile.job_for(function_key)
        meta = JobMeta(
            job_id=self.new_id("job"),
            function_key=function_key,
            business_function_id=pub.business_function_id,
            created_at=now,
            source=source,
            schedule_id=schedule_id,
            trigger_binding_id=trigger_binding_id,
            action_id=action_id,
            entity_id=entity_id,
            correlation_id=correlation_id,
            dedup_key=dedup_key,
            timeout_seconds=pub.timeout_seconds,  # null unless the publication declares it
            max_attempts=behaviour.max_attempts,
            retry_delay_s=behaviour.retry_delay_s,
        )
        attempts = plan_attempts(self.rng, behaviour, now, self.new_id)
        job = GeneratedJob(meta, attempts, behaviour.lease_timeout_s, behaviour.timeout_seconds)
        self.add_job(job)
        return job, True

    def add_job(self, job: Job) -> None:
        self.jobs[job.meta.job_id] = job
        self._live.setdefault(job.meta.business_function_id, []).append(job)
        self.index.add(job)
        if job.meta.dedup_key is not None:
            self.dedup[(job.meta.function_key, job.meta.dedup_key)] = job.meta.job_id

    def busy(self, business_function_id: str, at: float) -> Job | None:
        """A job of the function that is Queued or Leased at ``at``, if any.

        Occurrences fire in time order, so a job already terminal at ``at`` stays
        so for every later question and is dropped from the function's list.
        """
        live = self._live.get(business_function_id)
        if not live:
            return None
        found: Job | None = None
        kept: list[Job] = []
        for job in live:
            if job.meta.created_at > at:
                kept.append(job)
                continue
            view = job.view(at)
            if view is None or view.status in (QUEUED, LEASED):
                kept.append(job)
                if found is None and view is not None:
                    found = job
        self._live[business_function_id] = kept
        return found

    def _enqueue_occurrence(self, schedule: Schedule, at: float) -> Job:
        pub = Publication(schedule.business_function_id, None)
        row = catalog.PUBLICATIONS_BY_KEY.get(schedule.function_key)
        if row is not None:
            pub.timeout_seconds = row.timeout_seconds
        job, _ = self.enqueue(
            schedule.function_key,
            now=at,
            source=SRC_SCHEDULE,
            schedule_id=schedule.schedule_id,
            publication=pub,
        )
        return job

    # -- builds ----------------------------------------------------------------

    def submit_build(self, project: str, kind: int, kind_name: str, now: float) -> Build:
        behaviour = self.profile.build_for(project, kind_name)
        build = GeneratedBuild(self.new_id("bld"), project, kind, now, behaviour, self.rng)
        self.builds[project][build.build_id] = build
        return build

    def find_build(self, build_id: str) -> Build | None:
        return self.builds["net"].get(build_id) or self.builds["ui"].get(build_id)

    def describe(self) -> dict[str, Any]:
        return {
            "profile": self.profile.name,
            "seed": self.seed,
            "jobs": len(self.jobs),
            "builds": {k: len(v) for k, v in self.builds.items()},
            "schedules": len(self.schedules.schedules),
        }
