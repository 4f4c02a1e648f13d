"""The loop-lag monitor measures late timers and names what blocked the loop."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

import pytest

from orchestrator.looplag import LoopLagMonitor
from orchestrator.metrics import Metrics

LOGGER = "test.looplag"


def blocking_callback() -> None:
    time.sleep(0.3)  # the deliberate mistake: a blocking call on the loop


async def blocking_coroutine() -> None:
    await asyncio.sleep(0)
    time.sleep(0.3)  # the deliberate mistake under test, inside a task


def _lag(metrics: Metrics, suffix: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(
        f"orchestrator_event_loop_lag_seconds{suffix}", labels or None
    )
    return value or 0.0


async def _ticks(metrics: Metrics, at_least: int, interval_s: float = 0.02) -> None:
    # Bounded by the monitor's own intervals on the same loop, not by a wall
    # clock: a slow or busy machine slows both sides alike.
    for _ in range(20 * at_least):
        if _lag(metrics, "_count") >= at_least:
            return
        await asyncio.sleep(interval_s)
    raise AssertionError(f"the monitor ticked {_lag(metrics, '_count'):.0f} times, not {at_least}")


async def _run_monitor(
    metrics: Metrics, monitor: LoopLagMonitor, start_blocking: Callable[[], object]
) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(monitor.run(stop), name="looplag")
    try:
        await _ticks(metrics, 2)
        before = _lag(metrics, "_count")
        blocker = start_blocking()
        await _ticks(metrics, int(before) + 2)
        if isinstance(blocker, asyncio.Task):
            await blocker
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


async def test_a_blocking_callback_is_measured_and_named(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    metrics = Metrics()
    monitor = LoopLagMonitor(metrics, interval_s=0.02, warn_s=0.1, logger=logging.getLogger(LOGGER))
    loop = asyncio.get_running_loop()
    await _run_monitor(metrics, monitor, lambda: loop.call_soon(blocking_callback))

    # One observation at least as large as most of the 0.3 s block.
    assert _lag(metrics, "_sum") >= 0.2
    assert _lag(metrics, "_bucket", le="0.1") < _lag(metrics, "_count")
    [record] = _warnings(caplog)
    assert "blocking_callback" in record.getMessage()
    fields = record.fields  # type: ignore[attr-defined]
    assert "blocking_callback" in fields["blocked_in"]
    assert "test_looplag.py:" in fields["blocked_in"]
    assert fields["lag_s"] >= 0.2
    assert fields["samples"] >= 1


async def test_a_blocking_task_is_named_with_its_task(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    metrics = Metrics()
    monitor = LoopLagMonitor(metrics, interval_s=0.02, warn_s=0.1, logger=logging.getLogger(LOGGER))
    await _run_monitor(
        metrics,
        monitor,
        lambda: asyncio.create_task(blocking_coroutine(), name="blocker-task"),
    )

    [record] = _warnings(caplog)
    fields = record.fields  # type: ignore[attr-defined]
    assert "blocking_coroutine" in fields["blocked_in"]
    assert fields["task"] == "blocker-task"


async def test_an_idle_loop_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    metrics = Metrics()
    # Generous threshold: the shared test machine may hiccup, an idle loop never blocks 0.5 s.
    monitor = LoopLagMonitor(metrics, interval_s=0.02, warn_s=0.5, logger=logging.getLogger(LOGGER))
    stop = asyncio.Event()
    task = asyncio.create_task(monitor.run(stop))
    try:
        await _ticks(metrics, 10)
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
    assert _warnings(caplog) == []
    assert _lag(metrics, "_count") >= 10
    assert not [t for t in threading.enumerate() if t.name == "looplag-watchdog"]


async def test_cancellation_stops_the_watchdog() -> None:
    monitor = LoopLagMonitor(Metrics(), interval_s=0.02)
    task = asyncio.create_task(monitor.run(asyncio.Event()))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not [t for t in threading.enumerate() if t.name == "looplag-watchdog"]


def test_bad_intervals_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        LoopLagMonitor(Metrics(), interval_s=0)
