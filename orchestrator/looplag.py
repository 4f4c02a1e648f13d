"""Event-loop lag: how late a timer fires, and what kept the loop from firing it.

The monitor sleeps ``interval_s`` again and again and observes how late each
wake-up is in ``orchestrator_event_loop_lag_seconds``. A late wake-up says the
loop was blocked, not by what; by the time the coroutine runs again the
culprit has returned. So a watchdog thread watches the same schedule: when the
loop is ``warn_s`` past a wake-up it should have made, the thread samples the
loop thread's stack (``sys._current_frames``) and the running asyncio task,
repeating while the stall lasts. When the monitor finally wakes, it logs one
warning naming the function and file:line the samples caught most often.

Cost when healthy: one timer per interval on the loop and one thread wake-up
per interval; the stack is only read while the loop is stalled.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from types import FrameType

from orchestrator.metrics import Metrics

_LOG = "orchestrator.looplag"
_MAX_SAMPLES = 64
_STACK_DEPTH = 6
# Frames of the loop machinery itself say nothing about who blocked it.
_SKIP_DIRS = (os.path.dirname(asyncio.__file__) + os.sep,)


@dataclass(frozen=True)
class Sample:
    where: str  # "module.function (file:line)" of the innermost useful frame
    task: str | None  # the asyncio task running at that moment, if any
    stack: tuple[str, ...]  # innermost first, loop machinery left out


class LoopLagMonitor:
    def __init__(
        self,
        metrics: Metrics,
        interval_s: float = 0.25,
        warn_s: float = 0.1,
        logger: logging.Logger | None = None,
        min_warning_gap_s: float = 1.0,
    ) -> None:
        if interval_s <= 0 or warn_s <= 0:
            raise ValueError("interval_s and warn_s must be positive")
        self._metrics = metrics
        self._interval = interval_s
        self._warn = warn_s
        self._log = logger if logger is not None else logging.getLogger(_LOG)
        # A loop that is slow all the time would otherwise log on every tick.
        self._min_gap = min_warning_gap_s
        self._lock = threading.Lock()
        self._samples: list[Sample] = []
        # (tick, monotonic time the current sleep should end), or None while
        # the monitor itself runs; replaced, never mutated, so the watchdog
        # can tell one sleep from the next by identity.
        self._sleep: tuple[int, float] | None = None
        self._tick = 0
        self._last_warning = -float("inf")
        self._suppressed = 0
        self.latest_lag_s = 0.0  # the last wake-up's lateness (replicas judge stalls by it)

    async def run(self, stop: asyncio.Event) -> None:
        """Measure until ``stop`` is set (checked once per interval) or cancelled."""
        loop = asyncio.get_running_loop()
        halt = threading.Event()
        watchdog = threading.Thread(
            target=self._watch,
            args=(loop, threading.get_ident(), halt),
            name="looplag-watchdog",
            daemon=True,
        )
        watchdog.start()
        try:
            while not stop.is_set():
                expected = time.monotonic() + self._interval
                self._tick += 1
                self._sleep = (self._tick, expected)
                await asyncio.sleep(self._interval)
                with self._lock:
                    self._sleep = None
                    samples, self._samples = self._samples, []
                lag = max(0.0, time.monotonic() - expected)
                self.latest_lag_s = lag
                self._metrics.event_loop_lag_seconds.observe(lag)
                if lag >= self._warn:
                    self._report(lag, samples)
        finally:
            halt.set()
            # halt wakes the thread at once; joining keeps it owned, not leaked.
            watchdog.join(timeout=1.0)

    def _report(self, lag: float, samples: list[Sample]) -> None:
        now = time.monotonic()
        if now - self._last_warning < self._min_gap:
            self._suppressed += 1
            return
        self._last_warning = now
        suppressed, self._suppressed = self._suppressed, 0
        if samples:
            where, hits = Counter(s.where for s in samples).most_common(1)[0]
            top = next(s for s in samples if s.where == where)
            msg = f"event loop blocked for {lag:.3f} s in {where}"
            fields: dict[str, object] = {
                "lag_s": round(lag, 4),
                "blocked_in": where,
                "task": top.task,
                "blocked_stack": list(top.stack),
                "samples": len(samples),
                "samples_in_blocker": hits,
            }
        else:
            # Late, yet never stalled long enough for the watchdog: many short
            # callbacks (overload) rather than one blocking call.
            msg = f"event loop late by {lag:.3f} s (busy, no single blocking call caught)"
            fields = {"lag_s": round(lag, 4), "blocked_in": None, "samples": 0}
        if suppressed:
            fields["suppressed_warnings"] = suppressed
        self._log.warning(msg, extra={"fields": fields})

    def _watch(
        self, loop: asyncio.AbstractEventLoop, loop_thread: int, halt: threading.Event
    ) -> None:
        step = max(self._warn / 2, 0.005)
        while not halt.is_set():
            current = self._sleep
            if current is None:
                halt.wait(step)
                continue
            wait = current[1] + self._warn - time.monotonic()
            if wait > 0:
                halt.wait(wait)
                continue
            # The loop is warn_s past a wake-up it should have made: stalled.
            while not halt.is_set() and self._sleep is current:
                sample = _sample(loop, loop_thread)
                with self._lock:
                    # Checked again: a sample taken after the loop woke up
                    # shows the monitor itself, not the blocker.
                    room = len(self._samples) < _MAX_SAMPLES
                    if sample is not None and room and self._sleep is current:
                        self._samples.append(sample)
                halt.wait(step)


def _sample(loop: asyncio.AbstractEventLoop, loop_thread: int) -> Sample | None:
    """The loop thread's innermost frames (loop machinery left out) and its running task."""
    frame: FrameType | None = sys._current_frames().get(loop_thread)
    stack: list[str] = []
    while frame is not None and len(stack) < _STACK_DEPTH:
        code = frame.f_code
        if not code.co_filename.startswith(_SKIP_DIRS):
            module = frame.f_globals.get("__name__", "?")
            stack.append(
                f"{module}.{code.co_qualname} "
                f"({os.path.basename(code.co_filename)}:{frame.f_lineno})"
            )
        frame = frame.f_back
    if not stack:
        return None
    # Reading another thread's current task is a dict lookup; racy by nature
    # but harmless (at worst it names the task that runs a moment later).
    task = asyncio.current_task(loop)
    return Sample(where=stack[0], task=task.get_name() if task else None, stack=tuple(stack))
