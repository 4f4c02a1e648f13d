"""The lock-free poll metrics expose exactly what prometheus-client's own would."""

from __future__ import annotations

import re

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from orchestrator.loopmetrics import LoopCounter, LoopHistogram

BUCKETS = (0.001, 0.005, 0.5, 1, 2.5, 10)
VALUES = (0.0, 0.0005, 0.001, 0.0011, 0.005, 0.4999, 0.5, 1, 1.0001, 2.5, 10, 10.5, 1e6)


def _exposition(registry: CollectorRegistry) -> str:
    text = generate_latest(registry).decode()
    # Creation times differ by construction; everything else must match byte for byte.
    return re.sub(r"(_created\{[^}]*\}) \S+", r"\1 T", text)


def test_counter_and_histogram_match_prometheus_client() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    c1 = LoopCounter("x_reads_total", "Reads.", ["workspace", "result"], registry=ours)
    c2 = Counter("x_reads_total", "Reads.", ["workspace", "result"], registry=theirs)
    h1 = LoopHistogram("x_seconds", "Time.", ["workspace"], buckets=BUCKETS, registry=ours)
    h2 = Histogram("x_seconds", "Time.", ["workspace"], buckets=BUCKETS, registry=theirs)
    for counter in (c1, c2):
        counter.labels(workspace="a", result="ok").inc()
        counter.labels(workspace="a", result="ok").inc(2)
        counter.labels(workspace="b", result="timeout")  # pre-initialised at 0
    for hist in (h1, h2):
        hist.labels(workspace="empty")
        for v in VALUES:
            hist.labels(workspace="a").observe(v)
    assert _exposition(ours) == _exposition(theirs)
    assert 'x_seconds_bucket{le="0.5",workspace="a"} 7.0' in _exposition(ours)


def test_wrong_labels_and_unsorted_buckets_are_refused() -> None:
    registry = CollectorRegistry()
    counter = LoopCounter("y_total", "Y.", ["workspace"], registry=registry)
    with pytest.raises(ValueError, match="workspace"):
        counter.labels(kind="x")
    with pytest.raises(ValueError, match="increasing"):
        LoopHistogram("z_seconds", "Z.", [], buckets=(1, 0.5), registry=registry)
    # The same name twice in one registry is refused, as prometheus-client refuses it.
    with pytest.raises(ValueError):
        LoopCounter("y_total", "Y.", ["workspace"], registry=registry)
