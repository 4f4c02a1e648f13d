"""Adaptive polling's memory: the durations of each (workspace, kind, work class).

The engine tells the learner what each read showed (``observe``), which also
learns the duration of work that has ended, and gets back when the planner
would read next (None: the backoff decides). Summaries are loaded from the
store at start; every ``flush_interval_s`` and at shutdown, what was learned
since the last flush (each class's delta) is merged into the stored summary,
and the merged result, peers' samples included, becomes this process's own
(``adaptive.merged``: one merge, for one process or many replicas). Bounded: at
most ``polling.adaptive.max_classes`` classes, the least recently finished goes
first; at most ``metrics.max_classes`` of them get label values of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sys
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from orchestrator.engine.adaptive import DurationSketch, merged
from orchestrator.engine.plan import backoff_count, backoff_gap, next_read, plan_grid
from orchestrator.errors import StoreError
from orchestrator.store.base import Store, WorkClassMerge, WorkClassSummary
from orchestrator.vocabulary import CLASS_RE, TERMINAL_PHASES

if TYPE_CHECKING:
    from orchestrator.clock import Clock
    from orchestrator.config import Settings
    from orchestrator.engine.entry import Entry
    from orchestrator.kinds.base import Judgement, WorkSeen
    from orchestrator.metrics import Metrics

log = logging.getLogger("orchestrator.engine")

Key = tuple[str, str, str]  # (workspace, kind, work class)
QUANTILES = (0.5, 0.9, 0.99)
OTHER = "other"
_REPLAN_S = 1.0  # a busy class's grid is drawn again at most this often
# Durations in a row beyond the same end of everything seen before, each scoring 1
# (2 if more than a doubling beyond), are a change of regime once they score this
# (three just beyond: a stable class does it about once in 300,000 samples; two far
# beyond, rarer still): the class starts again from them alone, planned at once.
CHANGE_RUN = 3
_INTAKE_ALPHA = 0.1
_SPARE_READS = 0  # reads a tracking's plan may be ahead of the backoff's by


class _Class:
    __slots__ = (
        "before_run",
        "delta",
        "grid",
        "intake_age",
        "planned_at",
        "planned_count",
        "recent",
        "relearning",
        "replace",
        "run",
        "since_change",
        "sketch",
        "stale",
        "stored",
    )

    def __init__(self, sketch: DurationSketch) -> None:
        self.sketch = sketch  # all that is known: the stored summary and the delta since
        self.delta = DurationSketch()  # learned here since the last flush
        self.stored: dict[str, Any] | None = None  # the stored summary last adopted
        self.grid: tuple[float, ...] = ()
        self.stale = True
        self.planned_at = float("-inf")
        self.planned_count = 0  # samples the grid was drawn from
        self.recent: list[float] = []  # the durations of the current run of surprises
        self.run = 0  # their score, on one side: + above the history, - below
        self.before_run: DurationSketch | None = None  # the history the run is judged by
        self.relearning = False  # learning again after a change point: fewer samples do
        self.since_change = 1 << 30  # samples since the last change point
        self.replace = False  # a change point not yet stored: it replaces the stored summary
        self.intake_age = 0.0  # decayed mean age of the work when we were told of it


class DurationCollector(Collector):
    """``orchestrator_work_duration_seconds`` (a summary: quantiles and a count) and
    ``orchestrator_work_duration_samples``, computed from the sketches at scrape time."""

    def __init__(self, shown: dict[Key, DurationSketch]) -> None:
        self._shown = shown

    def collect(self) -> Iterable[Metric]:
        summary = Metric(
            "orchestrator_work_duration_seconds",
            "Learned time from creation to end of a work class, by quantile.",
            "summary",
        )
        samples = GaugeMetricFamily(
            "orchestrator_work_duration_samples",
            "Finished trackings the learned durations of a work class come from.",
            labels=["workspace", "kind", "class"],
        )
        for (workspace, kind, label), sketch in list(self._shown.items()):
            labels = {"workspace": workspace, "kind": kind, "class": label}
            for q in QUANTILES:
                summary.add_sample(summary.name, {**labels, "quantile": str(q)}, sketch.quantile(q))
            summary.add_sample(summary.name + "_count", labels, float(sketch.count))
            summary.add_sample(summary.name + "_sum", labels, sketch.count * sketch.mean)
            samples.add_metric([workspace, kind, label], float(sketch.count))
        yield summary
        yield samples


class Learned(NamedTuple):
    """What one read taught about a tracking's work: its class and when it began
    (for the entry), and the planner's next read (monotonic; None: the backoff)."""

    work_class: str | None
    started: float
    due: float | None
    beside: bool = False  # planned by work seen beside (a schedule's occurrence)
    # The plan let go of it (it outlived its class's grid): the backoff's delay at
    # its age, to go on from.
    rejoin: float | None = None


class Learner:
    def __init__(self, settings: Settings, metrics: Metrics, clock: Clock) -> None:
        self._polling = settings.polling
        self._cfg = settings.polling.adaptive
        self._max_labels = settings.metrics.max_classes
        self._clock = clock
        self._classes: OrderedDict[Key, _Class] = OrderedDict()
        self._dirty: set[Key] = set()
        self._forget: set[Key] = set()
        self._labelled: set[Key] = set()
        self._others: dict[tuple[str, str], DurationSketch] = {}
        # What /metrics shows, by (workspace, kind, class label): read at scrape time.
        self.shown: dict[Key, DurationSketch] = {}
        metrics.registry.register(DurationCollector(self.shown))

    # -- the engine's side ----------------------------------------------------------------

    def hint(self, entry: Entry) -> float | None:
        """A new tracking whose class the intake named: when to read it first (monotonic;
        None: the usual first read)."""
        s, now_m = entry.state, self._clock.monotonic()
        if s.work_class is None:
            return None
        key = (entry.workspace, entry.kind, s.work_class)
        due = self._plan(key, s.started, self._clock.now(), now_m)
        return None if due is None else min(due, now_m + self._polling.max_delay_s)

    def observe(self, entry: Entry, j: Judgement, now_w: float, now_m: float) -> Learned:
        """What a read showed: the class and times of the work (``j.work``, as the
        interpreter read them), its duration once it has ended (learned here), and the
        planner's next read; the entry is left as it is. A kind with no status route
        (a schedule) has no class of its own: it learns from and plans by the work it
        saw beside (``class_work``), if any."""
        work_class, started = entry.state.work_class, entry.state.started
        if j.class_work:
            due = self._beside(entry.workspace, j.class_work, now_w, now_m)
            return Learned(work_class, started, due, beside=True)
        if j.work is not None and j.phase is not None:
            s = j.work
            if s.work_class is not None and s.work_class != work_class:
                if work_class is not None:
                    log.warning(
                        "the work's own class differs from the intake's; the work's wins",
                        extra={"fields": {
                            "tracking_id": entry.tracking_id, "kind": entry.kind,
                            "given": work_class, "seen": s.work_class,
                        }},
                    )  # fmt: skip
                work_class = sys.intern(s.work_class)  # 64 bytes less per entry
            if s.created_at is not None:
                # Never later than we were told of it: a remote clock ahead of ours
                # would otherwise make every read late.
                started = min(s.created_at, entry.created_at)
            if j.phase in TERMINAL_PHASES:
                ended = s.ended_at if s.ended_at is not None else now_w
                age = entry.created_at - started
                self.learn(entry.workspace, entry.kind, work_class, ended - started, age)
                return Learned(work_class, started, None)
        if j.label != "ok" or work_class is None:
            return Learned(work_class, started, None)
        key = (entry.workspace, entry.kind, work_class)
        due = self._plan(key, started, now_w, now_m)
        if due is None and self._planned(key):
            # Work that outlived its class's grid (or a class whose durations changed)
            # joins the backoff at the pace it has at this age, not at its first delay.
            gap = backoff_gap(max(0.0, now_w - started), self._polling)
            return Learned(work_class, started, None, rejoin=gap)
        if due is not None:
            # Never ahead of the backoff's reads at the age of the planned read (a grid
            # still growing, as when many of a class start at once, would be read at
            # each new end): past that, the backoff's schedule.
            at = now_w - started + (due - now_m)
            if entry.state.polls + 1 > backoff_count(at, self._polling) + _SPARE_READS:
                due = None
        return Learned(work_class, started, due)

    def _planned(self, key: Key) -> bool:
        c = self._classes.get(key)
        return self._cfg.enabled and c is not None and bool(c.grid)

    def _beside(
        self, workspace: str, work: Sequence[WorkSeen], now_w: float, now_m: float
    ) -> float | None:
        """A schedule's occurrences: those that ended are learned (as function jobs of
        their function), and the soonest read any running one's class plans is returned."""
        due: float | None = None
        for w in work:
            if CLASS_RE.fullmatch(w.work_class) is None:
                continue
            if w.ended is not None:
                self.learn(workspace, w.kind, w.work_class, w.ended - w.started)
                continue
            # Never later than we saw it: a remote clock ahead of ours would read late.
            at = self._plan((workspace, w.kind, w.work_class), min(w.started, now_w), now_w, now_m)
            if at is not None and (due is None or at < due):
                due = at
        return due

    def _plan(self, key: Key, started: float, now_w: float, now_m: float) -> float | None:
        """The planner's next read (monotonic) of work of class ``key`` begun at ``started``
        (wall); None: too few samples, an unsettled class, or outlived."""
        if not self._cfg.enabled:
            return None
        c = self._classes.get(key)
        if c is None or not c.sketch.settled:
            return None
        needed = self._cfg.min_samples
        if c.sketch.count < (min(needed, 2) if c.relearning else needed):
            return None
        since = now_m - c.planned_at
        # Drawn again when it has learned something: a second after a change, else
        # once a twentieth more samples have come (or half a minute has passed).
        fresh = c.sketch.count - c.planned_count >= max(1, c.sketch.count // 20)
        if c.stale and since >= _REPLAN_S and (fresh or c.relearning or since >= 30.0):
            target = self._cfg.detection_target_s
            c.grid = plan_grid(c.sketch, target, self._polling, c.intake_age)
            c.stale, c.planned_at, c.planned_count = False, now_m, c.sketch.count
        age = max(0.0, now_w - started)
        at = next_read(c.grid, age, 0.0)
        return None if at is None else now_m + (at - age)

    # -- learning -------------------------------------------------------------------------

    def learn(
        self,
        workspace: str,
        kind: str,
        work_class: str | None,
        seconds: float,
        intake_age: float | None = None,
    ) -> None:
        """One finished duration of a class (the class unknown: nothing to learn), and
        how old the work was when we were told of it (None: not known)."""
        if work_class is None or not seconds >= 0:
            return
        key = (workspace, kind, work_class)
        c = self._classes.get(key)
        if c is None:
            c = self._admit(key, DurationSketch())
        else:
            self._classes.move_to_end(key)
        half_life = self._cfg.half_life_samples
        if intake_age is not None and intake_age >= 0:
            c.intake_age += _INTAKE_ALPHA * (intake_age - c.intake_age)
        # Judged against the history before this run of surprises: once added, the
        # first of a new regime's durations would make the next ones look ordinary.
        side = (c.before_run or c.sketch).side(seconds)
        if not side:
            c.run, c.before_run, c.recent = 0, None, []
        elif c.run * side > 0:
            c.run += side
            c.recent.append(seconds)
        else:
            c.run, c.before_run, c.recent = side, c.sketch.copy(), [seconds]
        c.since_change += 1
        if abs(c.run) >= CHANGE_RUN:
            # A change of regime: what came before says nothing of what comes now.
            c.sketch = DurationSketch()
            for d in c.recent:
                c.sketch.add(d, half_life)
            c.delta, c.run, c.before_run, c.recent = c.sketch.copy(), 0, None, []
            # A second change soon after the first is a class still moving (many
            # started at once, the short ones ending first): planned again only
            # from min_samples on.
            c.relearning = c.since_change >= self._cfg.min_samples
            c.replace, c.since_change = True, 0
            log.info(
                "work class changed its durations; learning it again",
                extra={"fields": {"workspace": workspace, "kind": kind, "class": work_class}},
            )
        else:
            c.delta.add(seconds, half_life, judged_by=c.sketch)
            c.sketch.add(seconds, half_life)
        c.stale = True
        self._dirty.add(key)
        self._show(key, c.sketch, seconds)

    def _admit(self, key: Key, sketch: DurationSketch) -> _Class:
        while len(self._classes) >= self._cfg.max_classes:
            gone, _ = self._classes.popitem(last=False)
            self._dirty.discard(gone)
            self._forget.add(gone)
        self._forget.discard(key)
        c = self._classes[key] = _Class(sketch)
        return c

    def _show(self, key: Key, sketch: DurationSketch, seconds: float | None = None) -> None:
        """Show ``sketch`` under labels of its own (the first ``metrics.max_classes``
        classes), or add to its kind's ``other`` the one duration ``seconds`` (None: all
        of ``sketch``)."""
        if key not in self._labelled and len(self._labelled) < self._max_labels:
            self._labelled.add(key)
        if key in self._labelled:
            self.shown[key] = sketch
            return
        other = self._others.setdefault(key[:2], DurationSketch())
        if seconds is None:
            other.merge(sketch)
        else:
            other.add(seconds, self._cfg.half_life_samples)
        self.shown[key[0], key[1], OTHER] = other

    # -- durable --------------------------------------------------------------------------

    async def load(self, store: Store) -> int:
        """The stored summaries, oldest first (so that the bound keeps the newest)."""
        rows = sorted(await store.load_work_classes(), key=lambda r: r.updated_at)
        for row in rows:
            key = (row.workspace, row.kind, row.work_class)
            sketch = DurationSketch.from_json(row.summary)
            self._admit(key, sketch).stored = row.summary
            self._show(key, sketch)
        self._forget.clear()
        return len(rows)

    async def flush(self, store: Store) -> None:
        """Merge each changed class's delta into the store, then adopt what is stored of
        every class held (peers' samples included); on a store error, keep the deltas
        for the next flush."""
        dirty, forget = self._dirty, self._forget
        self._dirty, self._forget = set(), set()
        half_life = self._cfg.half_life_samples
        sent: dict[Key, DurationSketch] = {}
        replaced: set[Key] = set()
        merges: list[WorkClassMerge] = []
        for key in sorted(dirty):
            if (c := self._classes.get(key)) is None:
                continue
            sent[key], c.delta = c.delta, DurationSketch()
            fold = functools.partial(_fold, c.sketch.copy(), sent[key], half_life, c.replace)
            if c.replace:
                replaced.add(key)
                c.replace = False
            merges.append(WorkClassMerge(*key, fold, self._clock.now()))
        try:
            stored = await store.merge_work_classes(merges, sorted(forget))
        except StoreError as exc:
            for key, delta in sent.items():
                if (c := self._classes.get(key)) is not None:
                    c.delta = merged(delta, c.delta, half_life)
                    c.replace = c.replace or key in replaced
                    self._dirty.add(key)
            self._forget |= forget
            log.warning(
                "work-class summaries not stored yet", extra={"fields": {"error": str(exc)}}
            )
            return
        if len(stored) < len(self._classes):
            # Classes not changed here may have been by peers; a failed read is retried
            # at the next flush.
            done = {(r.workspace, r.kind, r.work_class) for r in stored}
            with contextlib.suppress(StoreError):
                rows = await store.load_work_classes()
                stored += [r for r in rows if (r.workspace, r.kind, r.work_class) not in done]
        for row in stored:
            self._adopt(row)

    def _adopt(self, row: WorkClassSummary) -> None:
        key = (row.workspace, row.kind, row.work_class)
        c = self._classes.get(key)
        if c is None or row.summary == c.stored:
            return  # not held (gone from the bound meanwhile, or a peer's), or unchanged
        c.stored = row.summary
        # What was learned while the flush ran stays on top, for the next one.
        c.sketch = merged(
            DurationSketch.from_json(row.summary), c.delta, half_life=self._cfg.half_life_samples
        )
        c.stale = True
        if key in self._labelled:
            self.shown[key] = c.sketch

    async def run(self, store: Store, stop: asyncio.Event) -> None:
        """Flush every ``flush_interval_s`` until ``stop`` (the engine flushes last)."""
        while not stop.is_set():
            with anyio.move_on_after(self._cfg.flush_interval_s):
                await stop.wait()
            if not stop.is_set():
                await self.flush(store)


def _fold(
    local: DurationSketch,
    delta: DurationSketch,
    half_life: float,
    replace: bool,
    stored: dict[str, Any] | None,
) -> dict[str, Any]:
    """The stored summary with ``delta`` merged in. No row, or one nobody can read (a peer
    forgot the class, or this is its first flush), or a change of regime (``replace``):
    what this process knows, whole."""
    base = None if stored is None else DurationSketch.from_json(stored)
    if replace or base is None or base.count == 0:
        return local.to_json()
    return merged(base, delta, half_life).to_json()
