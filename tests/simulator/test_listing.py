"""The function operations lists read only what their filters' index holds, and answer as a scan would.

``scan_jobs`` and ``scan_runs`` are the lists as they were before the index:
every job held, on every request. The listing must match them exactly (order,
Limit, Total) for any filters.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s

from orchestrator.clock import iso, parse_iso
from orchestrator.simulator import catalog, listing
from orchestrator.simulator.cron import Cron
from orchestrator.simulator.index import skipped_keys
from orchestrator.simulator.jobs import GeneratedJob
from orchestrator.simulator.listing import Filters
from orchestrator.simulator.model import JobMeta
from orchestrator.simulator.profiles import Dist, JobBehaviour, Profile
from orchestrator.simulator.schedules import Schedule
from orchestrator.simulator.scripted import ScriptedJob
from orchestrator.simulator.state import Publication, SimState

T0 = 1_700_000_000.0
# "fn-adhoc.a" is both a function key and the BusinessFunctionId of "adhoc.a".
KEYS = ("billing.sync-invoices", "adhoc.a", "adhoc.b", "fn-adhoc.a")
FUNCTION_IDS = (*KEYS, "fn-billing-sync", "fn-adhoc.b", "fn-fn-adhoc.a", "fn-none")
BEHAVIOUR = JobBehaviour(
    pickup_s=Dist(0.0, 3.0),
    duration_s=Dist(0.0, 3.0),
    outcomes={"success": 0.4, "skipped": 0.1, "failed": 0.3, "timed_out": 0.1, "hang": 0.1},
    max_attempts=3,
    retry_delay_s=0.5,
    lease_timeout_s=2.0,
)


def function_id(key: str) -> str:
    row = catalog.FUNCTIONS_BY_KEY.get(key)
    return row.business_function_id if row is not None else catalog.ad_hoc_function_id(key)


def new_state(seed: int) -> SimState:
    return SimState(Profile(name="mix", job=BEHAVIOUR), seed, clock=lambda: T0)


def enqueue(st: SimState, key: str, at: float, **meta: Any) -> GeneratedJob:
    job, _ = st.enqueue(key, now=at, publication=Publication(function_id(key), None), **meta)
    assert isinstance(job, GeneratedJob)
    return job


def scan_jobs(st: SimState, f: Filters, now: float) -> tuple[list[dict[str, Any]], int]:
    items: list[dict[str, Any]] = []
    total = 0
    for job in reversed(list(st.jobs.values())):
        if not f.meta_matches(job) or not f.in_range(job.meta.created_at):
            continue
        view = job.view(now)
        if view is None or (f.status is not None and view.status != f.status):
            continue
        total += 1
        if len(items) < f.limit:
            items.append(view.body)
    return items, total


def scan_runs(st: SimState, f: Filters, now: float) -> tuple[list[dict[str, Any]], int]:
    rows: list[tuple[float, dict[str, Any]]] = []
    for job in st.jobs.values():
        if f.meta_matches(job):
            rows.extend((parse_iso(r["StartedAt"]), r) for r in job.runs(now) if r.get("StartedAt"))
    if f.binding_id is None and f.source in (None, 1):
        for at, row in st.schedules.skipped_runs:
            if f.schedule_id in (None, row["ScheduleId"]) and f.function_id in (
                None,
                row["BusinessFunctionId"],
            ):
                rows.append((at, row))
    matched = [
        row
        for at, row in rows
        if f.in_range(at) and (f.status is None or row.get("Status") == f.status)
    ]
    matched.sort(key=lambda r: r["StartedAt"], reverse=True)
    return matched[: f.limit], len(matched)


def count_reads(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many times the lists read a generated job's state (its view or its runs)."""
    reads = {"view": 0, "runs": 0}
    for name in reads:
        original = getattr(GeneratedJob, name)

        def counted(self: GeneratedJob, now: float, _name: str = name, _f: Any = original) -> Any:
            reads[_name] += 1
            return _f(self, now)

        monkeypatch.setattr(GeneratedJob, name, counted)
    return reads


def test_filtered_lists_read_only_their_function(monkeypatch: pytest.MonkeyPatch) -> None:
    st = new_state(3)
    wanted = []
    for n in range(3000):
        at = T0 + n * 0.1
        if n % 600 == 0:
            wanted.append(enqueue(st, "billing.sync-invoices", at))
        else:
            enqueue(st, f"other.fn-{n % 25}", at, schedule_id=f"sch-{n % 7}")
    now = T0 + 400
    reads = count_reads(monkeypatch)

    for fid in ("fn-billing-sync", "billing.sync-invoices"):
        f = Filters(function_id=fid, limit=2)
        assert listing.job_candidates(st, f) == wanted[::-1]
        items, total = listing.list_jobs(st, f, now)
        assert total == 5 and [j["JobId"] for j in items] == [w.meta.job_id for w in wanted[:-3:-1]]
    assert reads == {"view": 10, "runs": 0}

    # The service's run-history read: one function, since a recent instant.
    since = wanted[3].meta.created_at
    f = Filters(function_id="fn-billing-sync", start=since)
    jobs, skipped = listing.run_candidates(st, f)
    assert jobs == wanted[3:] and skipped == []
    rows, total = listing.list_runs(st, f, now)
    assert reads["runs"] == 2 and total == len(rows) > 0
    assert {r["JobId"] for r in rows} <= {w.meta.job_id for w in wanted[3:]}

    # A schedule and a window: only that schedule's jobs created in the window.
    f = Filters(schedule_id="sch-2", start=T0 + 100, end=T0 + 110)
    expected = [
        j
        for j in reversed(list(st.jobs.values()))
        if j.meta.schedule_id == "sch-2" and T0 + 100 <= j.meta.created_at <= T0 + 110
    ]
    assert listing.job_candidates(st, f) == expected and 0 < len(expected) < 20
    # A time window alone reads the jobs created in it, not the rest.
    f = Filters(start=T0 + 299.85)
    assert len(listing.job_candidates(st, f)) == 1
    assert listing.list_jobs(st, f, now) == scan_jobs(st, f, now)


def test_unreadable_run_start_is_read_by_every_run_list() -> None:
    st = new_state(1)
    meta = JobMeta("job-odd", "adhoc.a", "fn-adhoc.a", T0, timeout_seconds=60, max_attempts=1)
    odd = ScriptedJob(
        meta, [{"status": "Leased", "run": {"StartedAt": "not a time"}}], lambda p: f"{p}-1"
    )
    st.add_job(odd)
    f = Filters(function_id="adhoc.a", start=T0 + 1000)
    assert listing.run_candidates(st, f) == ([odd], [])
    assert listing.run_candidates(st, Filters(function_id="adhoc.b")) == ([], [])


def scripted(st: SimState, key: str, at: float, gaps: list[float], shift: float | None) -> None:
    """A scripted job failing once and retried; ``shift`` moves the retry's StartedAt."""
    names = ("Leased", "Failed", "Leased", "Completed")
    steps: list[dict[str, Any]] = [{"status": "Queued"}]
    elapsed = 0.0
    for name, gap in zip(names, gaps, strict=False):
        elapsed += gap
        steps.append({"after_s": elapsed, "status": name})
    if shift is not None and len(steps) > 3:
        steps[3]["run"] = {"StartedAt": iso(at + max(elapsed + shift, 0))}
    meta = JobMeta(st.new_id("job"), key, function_id(key), at, timeout_seconds=60, max_attempts=3)
    st.add_job(ScriptedJob(meta, steps, st.new_id))


def test_runs_sharing_a_started_at_keep_the_scan_order() -> None:
    st = new_state(5)
    scripted(st, "adhoc.a", T0 + 3, [0.0], None)  # a run at +3
    scripted(st, "adhoc.a", T0 + 1, [0.0, 1.0, 1.0], None)  # runs at +1 and +3
    st.schedules.skipped_index.add(skipped_keys("fn-adhoc.a", "s"), T0 + 3, 0)
    st.schedules.skipped_runs.append(
        (T0 + 3, {"StartedAt": iso(T0 + 3), "ScheduleId": "s", "BusinessFunctionId": "fn-adhoc.a"})
    )
    for f in (Filters(), Filters(function_id="fn-adhoc.a"), Filters(start=T0 + 0.5)):
        rows, total = listing.list_runs(st, f, T0 + 10)
        assert (rows, total) == scan_runs(st, f, T0 + 10) and total == 4
        first, second = st.jobs.values()
        assert [r.get("JobId") for r in rows[:3]] == [first.meta.job_id, second.meta.job_id, None]


# Whole and half seconds often: runs of different jobs (and skipped occurrences,
# on whole seconds) then share a StartedAt, and their order must still be the scan's.
offsets = s.integers(0, 20).map(float) | s.floats(0, 20, allow_nan=False)
gaps = s.sampled_from((0.0, 0.5, 1.0, 2.0)) | s.floats(0, 3, allow_nan=False)
job_specs = s.tuples(
    s.sampled_from(KEYS),
    offsets,
    s.sampled_from((0, 1, 2)),
    s.sampled_from((None, "sch-a", "sch-b")),
    s.sampled_from((None, "bind-x", "bind-y")),
    s.sampled_from(("generated", "scripted", "cancel", "stop")),
    s.lists(gaps, min_size=1, max_size=4),
    s.none() | s.floats(-2, 5, allow_nan=False),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=s.lists(job_specs, max_size=40), seed=s.integers(0, 2**16), data=s.data())
def test_lists_equal_a_full_scan(specs: list[Any], seed: int, data: s.DataObject) -> None:
    st = new_state(seed)
    # A per-second schedule whose occurrences overlap: skipped runs beside the jobs.
    st.schedules.add(
        Schedule("sch-a", "fn-adhoc.a", "adhoc.a", Cron.parse("* * * * * *"), "UTC", True, True),
        T0,
    )
    for n, (key, off, source, sch, bind, kind, gaps, shift) in enumerate(specs):
        at = T0 + off
        if n % 10 == 5:
            st.tick(T0 + n / 2)
        if kind == "scripted":
            scripted(st, key, at, gaps, shift)
            continue
        job = enqueue(st, key, at, source=source, schedule_id=sch, trigger_binding_id=bind)
        when = at + sum(gaps)
        if kind == "cancel":
            job.cancel(when)
        elif kind == "stop":
            view = job.view(when)
            job.stop_retries(when, view.modified_at)
    st.tick(T0 + 20)

    instants = [j.meta.created_at for j in st.jobs.values()]
    for job in st.jobs.values():
        instants += [parse_iso(r["StartedAt"]) for r in job.runs(T0 + 60) if r.get("StartedAt")]
    instants += [at for at, _ in st.schedules.skipped_runs]
    near = s.sampled_from(instants or [T0]).flatmap(
        lambda t: s.sampled_from((t, t - 0.0005, t + 0.0005, t + 0.001, t - 1e-6))
    )
    bound = s.none() | near | s.floats(T0 - 1, T0 + 40, allow_nan=False)
    for _ in range(6):
        f = Filters(
            function_id=data.draw(s.none() | s.sampled_from(FUNCTION_IDS)),
            schedule_id=data.draw(s.sampled_from((None, "sch-a", "sch-b", "sch-none"))),
            binding_id=data.draw(s.sampled_from((None, "bind-x", "bind-y"))),
            source=data.draw(s.sampled_from((None, 0, 1, 2))),
            status=data.draw(s.none() | s.integers(0, 5)),
            start=data.draw(bound),
            end=data.draw(bound),
            limit=data.draw(s.sampled_from((1, 3, 50, 1000))),
        )
        now = data.draw(s.floats(T0, T0 + 40, allow_nan=False))
        assert listing.list_jobs(st, f, now) == scan_jobs(st, f, now)
        assert listing.list_runs(st, f, now) == scan_runs(st, f, now)
